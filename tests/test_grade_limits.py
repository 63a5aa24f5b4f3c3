"""The limits `cudashell grade` sets on each section's process (issue 36, item 6): each escape route the issue found —
local arrays past the simulator's RAM, a macro bomb, an output flood into the submission's folder, a section left
running when the grader is stopped — ends as a named error in that section's score, and the other sections and
submissions are graded as usual."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from cudashell.backends.sim import SimBackend
from cudashell.frontends.limits import DEFAULT_LIMITS, Limits
from tests.test_grade import grades

SECTIONS = """\
section "floods its folder" points 10
run flood.cush
expect ok
section "local arrays" points 10
kernel load big.cu
expect ok
section "macro bomb" points 10
kernel load bomb.cu
expect ok
section "behaves" points 10
alloc pinned 4KB as p
expect ok
"""


def _submission(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "checks.cush").write_text(SECTIONS)
    sub = tmp_path / "student"
    sub.mkdir()
    (sub / "flood.cush").write_text("output flood.txt\n" + f"echo {'x' * 1000}\n" * 400)  # 400 KB
    (sub / "big.cu").write_text("__global__ void big(int *a) { int big[1 << 20]; big[threadIdx.x] = 1; "
                                "a[threadIdx.x] = big[threadIdx.x]; }\n")
    bomb = ["#define A0 x+x+x+x+x+x+x+x"] + [f"#define A{i} A{i-1} A{i-1} A{i-1} A{i-1}" for i in range(1, 12)]
    (sub / "bomb.cu").write_text("\n".join(bomb) + "\n__global__ void k(int *x) { int y = A11; }\n")
    return tmp_path / "checks.cush", sub


def test_each_escape_route_is_a_named_error_in_its_own_section(tmp_path):
    checks, sub = _submission(tmp_path)
    started = time.monotonic()
    _, (g,) = grades("--backend", "sim", "--output-limit", "64KB", str(checks), str(sub), tmp_path=tmp_path)
    assert time.monotonic() - started < 60
    got = {s["title"]: s["checks"][0] for s in g["sections"]}
    flood = got["floods its folder"]
    assert (flood["status"], flood["code"]) == ("error", "OUTPUT_LIMIT")  # wrote 127 MB in 5 s before
    assert "wrote a file past 64 KiB" in flood["message"]
    assert (sub / "flood.txt").stat().st_size <= 64 << 10
    local, bomb = got["local arrays"], got["macro bomb"]  # `expect ok` after the load: it says what the load met
    assert local["code"] == "EXPECT_FAILED" and "USAGE" in local["message"], local
    assert "needs 4 MiB of local memory a thread" in local["message"] and "CUDA allows 512 KiB" in local["message"]
    assert bomb["code"] == "EXPECT_FAILED" and "SOURCE_TOO_COMPLEX" in bomb["message"], bomb
    assert got["behaves"]["status"] == "passed" and g["score"] == 10


def test_the_options_are_checked_before_anything_is_graded(tmp_path):
    from tests.test_grade import grade

    checks, sub = _submission(tmp_path)
    code, _, err = grade("--memory-limit", "lots", str(checks), str(sub), tmp_path=tmp_path)
    assert code == 2 and "USAGE: --memory-limit takes a size above 0, got 'lots'" in err


def _report_limits(path: Path):
    """A command that writes, from inside the section's process, the limits that process runs under."""
    def report(*args, **kwargs):
        import ctypes

        got = ctypes.c_int(0)
        ctypes.CDLL(None).prctl(2, ctypes.byref(got))  # PR_GET_PDEATHSIG
        names = ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE", "RLIMIT_CORE")
        values = {n: resource.getrlimit(getattr(resource, n)) for n in names}
        path.write_text(repr((values, got.value, signal.getsignal(signal.SIGXFSZ) == signal.SIG_DFL)))
        raise OSError("reported")
    return report


def test_a_sections_process_runs_under_every_limit_and_dies_with_the_grader(tmp_path, monkeypatch):
    checks, sub = _submission(tmp_path)
    (tmp_path / "checks.cush").write_text('section "reports" points 1\nalloc device 4KB as d\nmemset d 0\nexpect ok\n')
    report = tmp_path / "limits.txt"
    monkeypatch.setattr(SimBackend, "memset", _report_limits(report))
    grades("--backend", "sim", "--time-limit", "5", "--memory-limit", "1GB", str(checks), str(sub), tmp_path=tmp_path)
    values, deathsig, xfsz_default = eval(report.read_text())  # noqa: S307 - written by the test itself
    assert values["RLIMIT_CPU"] == (10, 12)  # 5 s a check, one check and the commands after it; SIGKILL 2 s later
    assert values["RLIMIT_FSIZE"] == (DEFAULT_LIMITS.output,) * 2
    assert values["RLIMIT_NOFILE"] == (256, 256) and values["RLIMIT_CORE"] == (0, 0)
    assert values["RLIMIT_AS"][0] != resource.RLIM_INFINITY and values["RLIMIT_AS"][0] >= 1 << 30
    assert deathsig == signal.SIGKILL and xfsz_default


def test_memory_past_the_limit_is_memory_limit_and_the_next_section_runs(tmp_path, monkeypatch):
    checks, sub = _submission(tmp_path)
    (tmp_path / "checks.cush").write_text('section "leaks" points 1\nalloc device 4KB as d\nmemset d 0\nexpect ok\n'
                                          'expect ok\nsection "behaves" points 1\nalloc pinned 4KB as p\nexpect ok\n')

    def leak(*args, **kwargs):  # what no budget counts: 3 GiB of address space (untouched: no RAM without a limit)
        return np.zeros(3 << 30, np.uint8)
    monkeypatch.setattr(SimBackend, "memset", leak)
    _, (g,) = grades("--backend", "sim", str(checks), str(sub), tmp_path=tmp_path)
    leaks, after = g["sections"][0]["checks"]
    assert leaks["code"] == "MEMORY_LIMIT" and "limit of 2 GiB of memory" in leaks["message"], leaks
    assert after["code"] == "MEMORY_LIMIT" and after["message"].startswith("not reached")
    assert g["sections"][1]["checks"][0]["status"] == "passed"


def test_a_section_ended_by_sigxcpu_is_cpu_limit(tmp_path, monkeypatch):
    checks, sub = _submission(tmp_path)
    (tmp_path / "checks.cush").write_text('section "spins" points 1\nalloc device 4KB as d\nmemset d 0\nexpect ok\n'
                                          'section "behaves" points 1\nalloc pinned 4KB as p\nexpect ok\n')
    monkeypatch.setattr(SimBackend, "memset", lambda *a, **k: os.kill(os.getpid(), signal.SIGXCPU))
    _, (g,) = grades("--backend", "sim", "--time-limit", "7", str(checks), str(sub), tmp_path=tmp_path)
    spins = g["sections"][0]["checks"][0]
    assert spins["code"] == "CPU_LIMIT" and "used its 14 s of CPU time" in spins["message"]
    assert g["sections"][1]["checks"][0]["status"] == "passed"


def test_limits_name_how_a_section_ended():
    limits = Limits(output=1 << 20, cpu=30)
    assert limits.ended(-signal.SIGXFSZ)[0] == "OUTPUT_LIMIT"
    assert limits.ended(-signal.SIGXCPU) == ("CPU_LIMIT", "the section's process used its 30 s of CPU time (its "
                                                          "checks' time limits together) and was stopped")
    assert limits.ended(-signal.SIGSEGV) == ("CHECK_CRASHED", "the process running it ended (signal SIGSEGV) without "
                                                              "a result")
    assert limits.ended(11)[1] == "the process running it ended (exit status 11) without a result"
    assert limits.ended(-40)[1] == "the process running it ended (signal 40) without a result"


# ------------------------------------------------------------------ stopping the grader stops its sections
SPIN = "kernel define forever <<< __global__ void forever(int *a) { while (a[0] == 0) { } } >>>\n" \
       "alloc device 4B as d\nlaunch forever d grid 1 block 1\nsync\n"


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return found


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may be slow to reap an orphan)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _grading_a_spin(tmp_path: Path) -> tuple[subprocess.Popen, int]:
    (tmp_path / "checks.cush").write_text('section "spins" points 1\nrun spin.cush\nexpect ok\n')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "spin.cush").write_text(SPIN)
    grader = subprocess.Popen([sys.executable, "-m", "cudashell", "grade", "--backend", "sim", "checks.cush", "sub"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not (sections := _children(grader.pid)):
        assert time.monotonic() < deadline and grader.poll() is None, "no section started"
        time.sleep(0.05)
    time.sleep(1.0)  # into the kernel's loop (the section's process at 100% CPU)
    assert _running(sections[0])
    return grader, sections[0]


def _gone(pid: int, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while _running(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _running(pid)


def test_sigterm_to_the_grader_ends_its_section_and_says_so(tmp_path):
    grader, section = _grading_a_spin(tmp_path)
    try:
        grader.send_signal(signal.SIGTERM)
        _, err = grader.communicate(timeout=20)
        assert grader.returncode == 143
        assert "cudashell grade: stopped by SIGTERM; the sections' processes were ended" in err
        assert "Traceback" not in err
        assert _gone(section)  # ran on at 99% CPU as an orphan before
    finally:
        grader.kill()
        with_kill(section)


def test_sigkill_to_the_grader_ends_its_section_too(tmp_path):
    grader, section = _grading_a_spin(tmp_path)
    try:
        grader.kill()
        grader.wait(timeout=20)
        assert _gone(section)  # PR_SET_PDEATHSIG: no handler runs on SIGKILL, the kernel ends the section
    finally:
        with_kill(section)


def with_kill(pid: int) -> None:
    """A test that failed leaves no spinning process behind."""
    if _running(pid):
        os.kill(pid, signal.SIGKILL)
