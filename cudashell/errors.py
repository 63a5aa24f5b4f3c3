"""The one error type every layer raises, so a failure always renders as one line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ShellError(Exception):
    """A refused command: a code (the driver's `CUDA_ERROR_*` name or a shell code), a message,
    an optional hint, and the column (1-based) in the command line where the problem is."""

    code: str
    message: str
    hint: str | None = None
    col: int | None = None

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def at(self, col: int | None) -> "ShellError":
        """Attach a column unless a deeper layer already placed one."""
        if self.col is None:
            self.col = col
        return self


# The shell's own codes (the driver's are its CUDA_ERROR_* names): docs/commands.md lists this catalogue, and a
# test fails when code raises one that is not here.
SHELL_CODES = {
    "USAGE": "the command is not written as its syntax says",
    "UNKNOWN_COMMAND": "no command of that name",
    "NO_SUCH_BUFFER": "no buffer of that name in the session",
    "NO_SUCH_STREAM": "no stream of that name",
    "NO_SUCH_EVENT": "no event of that name",
    "NO_SUCH_POOL": "no memory pool of that name (`pool` lists them)",
    "NO_SUCH_KERNEL": "no kernel of that name (built-in or loaded)",
    "NO_SUCH_DEMO": "no shipped demo of that name",
    "NO_SUCH_LESSON": "no lesson of that name (shipped, or a .toml file)",
    "BAD_LESSON": "a lesson file that does not follow docs/lessons.md (file:line, what is wrong)",
    "NO_LESSON": "`lesson hint`, `answer`, `skip` or `quit` with no lesson running",
    "NO_SUCH_FILE": "a script or kernel file that cannot be read",
    "NOT_A_FILE": "a script, lesson or CUDA source that is a device, a FIFO or a socket (read whole, it might not end)",
    "INPUT_TOO_LARGE": "a script or lesson over 1 MiB, or a CUDA source (with its #includes) over 4 MiB",
    "SOURCE_TOO_COMPLEX": "CUDA C nested deeper, or macros expanding further, than the simulator's front end follows",
    "NAME_TAKEN": "the name is in use",
    "OUT_OF_BOUNDS": "the range is not inside the buffer (checked before any driver call)",
    "NOT_HOST_ACCESSIBLE": "the host cannot read or write that memory (device memory)",
    "NOT_DEVICE_ACCESSIBLE": "the GPU cannot reach that memory (pageable, without `unchecked`)",
    "KIND_MISMATCH": "the direction or operation does not fit the buffers' kinds",
    "PIN_LIMIT": "pinning that much would exceed the guard (half of RAM, or RLIMIT_MEMLOCK)",
    "STREAMS_HELD": "the call would wait for work that `hold` keeps waiting: it would never return",
    "ALREADY_HELD": "`hold` while the streams are held",
    "NOT_HELD": "`release` with nothing held",
    "BAD_ENCODING": "a script that is not UTF-8 (the byte and where it is are named)",
    "SIM_BUDGET": "the simulator's budget of real RAM for the bytes it holds is spent (not a GPU limit)",
    "HOST_OUT_OF_MEMORY": "malloc found no room for pageable memory (the host's memory or addresses, not the driver's)",
    "NOT_EXPORTABLE": "export c cannot write that command as C that does what the session did",
    "NOT_PLANNABLE": "a call that cannot run on the GPU side without the shell",
    "EXPECT_FAILED": "an `expect` line found something else",
    "SCRIPT_FAILED": "a script run by `run` or `demo` had a failed command",
    "RECURSION": "scripts nested deeper than 16",
    "IO_ERROR": "a file could not be written",
    "DISK_FULL": "a file could not be written for want of room (disk or quota): the file is left as it was",
    "NOT_SUPPORTED_ON_SIM": "the simulator does not run that construct of CUDA C (the guide lists its subset)",
    "DIVERGENT_BARRIER": "a kernel's __syncthreads() is reached by only some threads of a block (a GPU would hang)",
    "FILE_EXISTS": "the file is there already: `force` replaces it",
    "RUNAWAY_KERNEL": "a kernel's loop ran on for seconds on the simulator without ending (a GPU would run on)",
    "NOT_INSTALLED": "an optional package is missing (matplotlib for plots)",
    "NO_GPU": "the cuda backend was asked for and no GPU answered",
    "ONE_GPU": "the command works between GPUs and there is one",
    "NO_PEER_ACCESS": "a kernel would touch another GPU's memory without peer access (the GPU would fault)",
    "OTHER_GPU": "the operation runs on the session's GPU and the buffer is on another",
    "NUMA_BIND": "the kernel would not place host pages on that NUMA node (mbind)",
    "OTHER_CONTEXT": "without UVA, a kernel in one context cannot use another context's device memory",
    "NO_SUCH_CONTEXT": "no context by that name (`contexts` lists them)",
    "CONTEXT_IN_USE": "a context still holds buffers, streams or events: they go first",
    "BAD_PROFILE": "a simulator profile file that cannot be used",
    "NEEDS_PROFILE": "a script's `require profile NAME`: it runs only where the simulator models that machine",
    "NO_REFERENCE": "`compare ref` names no shipped calibrated profile and no profile file",
    "NOTHING_MEASURED": "`compare ref` before the session measured anything (a bench, a demo, calibrate, a copy)",
    "BAD_CONFIG": "a line of the config file that cannot be used (a warning: its key keeps the default)",
    "GPU_ABANDONED": "a wait on the GPU was given up (Ctrl-C or gpu-timeout): `reset`",
    "GPU_WORKER_DIED": "the GPU worker process ended: `reset`",
    "NO_SUCH_HISTORY": "`!N`, `!!` or `!PREFIX` at the prompt names no command in the history",
    "NOT_INTERACTIVE": "the command opens an editor or waits for keys: it works at the prompt only",
    "OUTSIDE_SUBMISSION": "`cudashell grade`: the submission named a file outside its own folder",
    "OUTSIDE_FOLDER": "a script, a notebook cell or a lesson would write outside the folder it runs from, a hidden "
                      "file or cudashell's own config or state",
    "TIME_LIMIT": "`cudashell grade`: a check ran past its time limit (`--time-limit`) and was stopped",
    "CHECK_CRASHED": "`cudashell grade`: the process running a check ended without reporting it",
    "MEMORY_LIMIT": "`cudashell grade`: a section's process reached its address-space limit (`--memory-limit`)",
    "CPU_LIMIT": "`cudashell grade`: a section's process used up its CPU time (its checks' time limits together)",
    "OUTPUT_LIMIT": "`cudashell grade`: a section wrote a file past the file-size limit (`--output-limit`)",
    "INTERRUPTED": "Ctrl-C",
    "INTERNAL_ERROR": "a bug in cudashell: `--debug` shows the traceback",
}


def usage(message: str, col: int | None = None, hint: str | None = None) -> ShellError:
    return ShellError("USAGE", message, hint, col)


# Errors after which the context (on a GPU: the whole process) is unusable: every later call fails the same
# way, and only a new context in a new process works again (CUDA driver API, "sticky" errors; seen on the H100).
STICKY = frozenset({"CUDA_ERROR_ILLEGAL_ADDRESS", "CUDA_ERROR_LAUNCH_FAILED", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
                    "CUDA_ERROR_MISALIGNED_ADDRESS", "CUDA_ERROR_INVALID_ADDRESS_SPACE", "CUDA_ERROR_INVALID_PC",
                    "CUDA_ERROR_HARDWARE_STACK_ERROR", "CUDA_ERROR_ASSERT", "CUDA_ERROR_LAUNCH_TIMEOUT",
                    "CUDA_ERROR_ECC_UNCORRECTABLE", "GPU_ABANDONED", "GPU_WORKER_DIED"})
OUTSIDE_HINT = "a submission opens and writes files only inside its own folder"  # `cudashell grade`
RESET_HINT = "the context is dead; `reset` brings the session back on a fresh one (host contents are kept)"


def held_error(what: str, why: str | None = None) -> ShellError:
    """`hold` keeps every stream waiting for `release`: a call that waits for the GPU would never return."""
    return ShellError("STREAMS_HELD", f"{what} would wait for work that `hold` keeps from running: it would "
                      "never return" + (f" ({why})" if why else ""), "`release` first")
