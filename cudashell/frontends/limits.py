"""The limits `cudashell grade` sets on each section's process, and what it says when one is met.

A submission is code nobody checked: its section runs in a forked process (grade.py) that may add `memory` bytes of
address space to what it started with (RLIMIT_AS: where the backend's memory is the process's own, the simulator),
write no file past `output` bytes (RLIMIT_FSIZE, SIGXFSZ left to end the process), use the CPU for as long as its
checks' time limits together (RLIMIT_CPU, SIGXCPU) and hold `files` files open (RLIMIT_NOFILE); it leaves no core
file in the submission's folder (RLIMIT_CORE 0) and dies with the grader (PR_SET_PDEATHSIG, Linux), which on
SIGTERM ends every section's process and the GPU worker it started before ending itself. A limit met is a named
error in that section's score — MEMORY_LIMIT, OUTPUT_LIMIT, CPU_LIMIT — never the grader's."""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import re
import resource
import signal
from dataclasses import dataclass

from ..errors import ShellError
from ..sizes import format_size

DEFAULT_MEMORY = 2 << 30  # address space a section may add: what the simulator holds (its buffers' bytes, a kernel's
# lanes) counts, so a teacher whose checks hold more raises it
DEFAULT_OUTPUT = 16 << 20  # a file a submission writes (`output f`, `save`, `export c`): its results, not a flood
OPEN_FILES = 256  # files open at once: the shell needs a handful, nvcc a few dozen
CPU_GRACE = 2  # seconds between SIGXCPU (which ends the process) and the kernel's SIGKILL, should it be ignored
LIMIT_CODES = frozenset({"MEMORY_LIMIT", "OUTPUT_LIMIT", "CPU_LIMIT"})
PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    memory: int = DEFAULT_MEMORY  # bytes of address space a section's process may map beyond its own at the fork
    output: int = DEFAULT_OUTPUT  # bytes any one file it writes may reach
    cpu: int = 60  # seconds of CPU time its process may use
    files: int = OPEN_FILES

    def for_section(self, checks: int, time_limit: float) -> Limits:
        """A section's: its CPU time is what its checks may take, each `time_limit` seconds, and one more for the
        commands after the last check (the wall-clock limit stops a single check first)."""
        return Limits(self.memory, self.output, math.ceil(time_limit * (checks + 1)), self.files)

    def named(self, error: ShellError | None) -> ShellError | None:
        """A MemoryError under the address-space limit reaches the shell as an INTERNAL_ERROR: it is the limit's."""
        if error is None or error.code != "INTERNAL_ERROR" or not error.message.startswith("MemoryError"):
            return error
        return self.memory_error()

    def reported(self, error: ShellError, line: str) -> tuple[str, str]:
        """(code, line) of an error the shell reported: a limit's own words where it was a limit."""
        named = self.named(error)
        return (error.code, line) if named is error else (named.code, f"{named.code}: {named.message}")

    def memory_error(self) -> ShellError:
        return ShellError("MEMORY_LIMIT", f"the section's process reached its limit of {format_size(self.memory)} "
                          "of memory (address space) and was stopped", "`cudashell grade --memory-limit` sets it")

    def ended(self, exitcode: int | None) -> tuple[str, str]:
        """The code and the words for a section's process that ended without a result, by how it ended."""
        if exitcode == -signal.SIGXFSZ:
            return "OUTPUT_LIMIT", (f"the section wrote a file past {format_size(self.output)} and its process was "
                                    "stopped (`cudashell grade --output-limit` sets the limit)")
        if exitcode == -signal.SIGXCPU:
            return "CPU_LIMIT", (f"the section's process used its {self.cpu} s of CPU time (its checks' time limits "
                                 "together) and was stopped")
        how = f"signal {_signal_name(-exitcode)}" if exitcode is not None and exitcode < 0 else f"exit status {exitcode}"
        return "CHECK_CRASHED", f"the process running it ended ({how}) without a result"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:  # a real-time signal
        return str(number)


DEFAULT_LIMITS = Limits()


# ------------------------------------------------------------------ in the section's process
def die_with(grader: int) -> None:
    """The first thing the section's process does: the kernel ends it when the grader ends, however it ends
    (SIGKILL included), so no section runs on as an orphan; and SIGTERM ends it as it ends any program (the grader's
    own handler, inherited through the fork, is not this process's)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the grader's SIGTERM handler still ends it
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != grader:  # the grader ended before the request was made
        os._exit(1)


def _lower(which: int, soft: int, hard: int | None = None) -> None:
    """Lower a limit (never above the hard limit the grader itself has)."""
    _, ceiling = resource.getrlimit(which)
    hard = soft if hard is None else hard
    if ceiling != resource.RLIM_INFINITY:
        soft, hard = min(soft, ceiling), min(hard, ceiling)
    resource.setrlimit(which, (soft, hard))


def mapped_bytes() -> int:
    """The address space this process maps now (Linux /proc; elsewhere 0): a process forked from a grader with
    many threads' stacks and arenas already maps gigabytes it never touches."""
    try:
        with open("/proc/self/status") as status:
            m = re.search(r"^VmSize:\s*(\d+) kB", status.read(), re.MULTILINE)
    except OSError:
        return 0
    return int(m.group(1)) << 10 if m else 0


def confine(limits: Limits, backend) -> None:
    """Set the section's limits, once its backend is open (a GPU worker it starts keeps the grader's: the CUDA driver
    maps the GPU's memory into its address space). Where the backend has no process of its own (the simulator), its
    memory is this process's, and the address space is limited too."""
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it (a write then fails with EFBIG): it ends us
    signal.signal(signal.SIGXCPU, signal.SIG_DFL)
    _lower(resource.RLIMIT_CORE, 0)  # a crash leaves no core file in the submission's folder
    _lower(resource.RLIMIT_FSIZE, limits.output)
    _lower(resource.RLIMIT_NOFILE, limits.files)
    _lower(resource.RLIMIT_CPU, limits.cpu, limits.cpu + CPU_GRACE)
    if backend.proc is None:
        _lower(resource.RLIMIT_AS, mapped_bytes() + limits.memory)


# ------------------------------------------------------------------ in the grader
_running: dict[int, tuple] = {}  # the sections' processes now running: pid → (process, the GPU worker pids it told)


def running(process, workers: list[int]) -> None:
    """A section's process started: SIGTERM to the grader ends it, and `workers` (a list the caller fills)."""
    _running[process.pid] = (process, workers)


def finished(process) -> None:
    _running.pop(process.pid, None)


def end_sections() -> None:
    """Every section's process now running, and the GPU workers they started (a worker in a hung kernel would hold
    the GPU): SIGKILL, then reaped."""
    for process, workers in list(_running.values()):
        for pid in workers:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        process.kill()
        process.join()


@contextlib.contextmanager
def sections_end_with_grader(say):
    """SIGTERM to `cudashell grade`: the sections' processes end first, then the grader, with one line (`say`) and
    the exit status a program SIGTERM ends has (143)."""
    def stop(signum, frame):
        end_sections()
        say(f"cudashell grade: stopped by {signal.Signals(signum).name}; the sections' processes were ended")
        raise SystemExit(128 + signum)

    try:
        before = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread (grade called from a test's thread): nothing to hand on
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)
