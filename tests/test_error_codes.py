"""Every code the shell gives is in the catalogue the reference lists (errors.SHELL_CODES, docs/commands.md), and
every code in the catalogue is one the shell gives. Checked on what comes out of real runs, not on the source's
text: a code raised through a variable (`ShellError(e.code, …)`, a fault's code, `backend.dead`) counts too."""

from __future__ import annotations

import io
import re

import pytest

import cudashell.commands  # noqa: F401  (the registry the fuzzer draws from)
from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.docs import REFERENCE
from cudashell.errors import SHELL_CODES, ShellError
from cudashell.frontends.shell import Shell
from cudashell.language.confinement import Confinement
from tests.conftest import gpu_missing

DRIVER = re.compile(r"CUDA_ERROR_[A-Z0-9_]+")


def shell_on(profile: str | None = None, tmp_path=None, confined: str | None = None) -> tuple[Shell, list[str]]:
    """A shell, and the code of every error it reports, nested ones (a script's, a block's) included; `confined`:
    "submission", as `cudashell grade` confines a submission to its folder, "cell" as a notebook confines what its
    cells write."""
    codes: list[str] = []
    confinement = None if confined is None else Confinement.submission(tmp_path) if confined == "submission" else \
        Confinement(tmp_path, who="a notebook cell")
    sh = Shell(SimBackend(Profile.load(profile)), "codes", out=io.StringIO(), err=io.StringIO(), workdir=tmp_path,
               confinement=confinement, on_report=lambda result, error: error and codes.append(error.code))
    return sh, codes


def undocumented(codes) -> set[str]:
    return {c for c in codes if c not in SHELL_CODES and not DRIVER.fullmatch(c)}


# ------------------------------------------------------------------ each catalogued code, produced by what makes it
KERNEL = "kernel define {name} <<< __global__ void {name}(int *a) {{ {body} }} >>>"
# code → (simulator profile, lines run in order; the last one must fail with the code)
TRIGGERS = {
    "USAGE": (None, ["alloc pinned 64QB"]),
    "UNKNOWN_COMMAND": (None, ["allocate pinned 4KB"]),
    "NO_SUCH_BUFFER": (None, ["free nosuch"]),
    "NO_SUCH_STREAM": (None, ["sync stream 9"]),
    "NO_SUCH_EVENT": (None, ["event record a", "elapsed a nope"]),
    "NO_SUCH_POOL": (None, ["pool trim nosuch"]),
    "NO_SUCH_KERNEL": (None, ["alloc device 4KB", "launch nosuch d0"]),
    "NO_SUCH_DEMO": (None, ["demo nosuch"]),
    "NO_SUCH_LESSON": (None, ["lesson nosuch"]),
    "BAD_LESSON": (None, ["echo not toml", "save bad.toml", "lesson bad.toml"]),  # a .cush script is not a lesson
    "NO_LESSON": (None, ["lesson hint"]),
    "NEEDS_PROFILE": (None, ["require profile one-copy-engine"]),
    "NOTHING_MEASURED": (None, ["compare ref h100"]),
    "NO_REFERENCE": (None, ["bench latency rounds 10", "compare ref nosuch"]),
    "NO_SUCH_FILE": (None, ["run missing.cush"]),
    "NOT_A_FILE": (None, ["run /dev/null"]),
    "INPUT_TOO_LARGE": (None, ["run big.cush"]),
    "SOURCE_TOO_COMPLEX": (None, [KERNEL.format(name="deep", body="a[0] = " + "+".join(["1"] * 300) + ";")]),
    "NAME_TAKEN": (None, ["alloc pinned 4KB as a", "alloc pinned 4KB as a"]),
    "OUT_OF_BOUNDS": (None, ["alloc pinned 4KB", "show p0 offset 5KB"]),
    "NOT_HOST_ACCESSIBLE": (None, ["alloc device 4KB", "show d0"]),
    "NOT_DEVICE_ACCESSIBLE": (None, ["alloc pageable 4KB as a; alloc device 4KB as b", "launch sum a b b"]),
    "KIND_MISMATCH": (None, ["alloc pinned 4KB; alloc device 4KB", "memcpy d2h p0 d0"]),
    "PIN_LIMIT": (None, ["set pinlimit 1MB", "alloc pinned 2MB"]),
    "STREAMS_HELD": (None, ["hold", "demo zero-copy"]),
    "ALREADY_HELD": (None, ["hold", "hold"]),
    "NOT_HELD": (None, ["release"]),
    "EXPECT_FAILED": (None, ["ls", "expect error NO_SUCH_BUFFER"]),
    "SCRIPT_FAILED": (None, ["run fails.cush"]),
    "RECURSION": (None, ["run self.cush"]),
    "BAD_ENCODING": (None, ["run latin1.cush"]),
    "SIM_BUDGET": (None, ["alloc pageable 8GB", "fill h0 1"]),
    "HOST_OUT_OF_MEMORY": ("no-uva", ["alloc pageable 512MB", "alloc pageable 256MB"]),  # 624 MiB of addresses
    "IO_ERROR": (None, ["output /nonexistent-dir/x.txt"]),
    "NOT_INTERACTIVE": (None, ["edit"]),
    "NOT_SUPPORTED_ON_SIM": (None, ["kernel define k <<< __global__ void k(float *o) { o[0] = copysignf(1.0f, o[1]); } >>>"]),
    "DIVERGENT_BARRIER": (None, [KERNEL.format(name="half", body="if (threadIdx.x < 16) { __syncthreads(); } "
                                                                "a[threadIdx.x] = 1;"),
                                 "alloc device 256B as d", "launch half d grid 1 block 64"]),
    "NOT_EXPORTABLE": (None, ["repeat 2 <<< alloc pinned 4KB >>>", "export c s.cu"]),
    "FILE_EXISTS": (None, ["alloc pinned 4KB", "save kept.cush", "save kept.cush"]),
    "RUNAWAY_KERNEL": (None, [KERNEL.format(name="forever", body="while (a[0] == 0) { }"), "alloc device 4B as o",
                              "launch forever o grid 1 block 1"]),
    "NOT_INSTALLED": (None, ["bench overlap streams 1 --plot o.png"]),
    "ONE_GPU": (None, ["bench peer 1MB"]),
    "NO_PEER_ACCESS": ("two-h200", ["device use 0; alloc device 4MB as d0; device use 1; stream create as s1",
                                    "device use 0", "launch increment d0 stream s1"]),
    "OTHER_GPU": ("two-h200", ["device use 1; alloc device 1MB as d1; device use 0", "memset d1 0"]),
    "OTHER_CONTEXT": ("two-gpus-no-uva", ["alloc device 1MB as d0; context create as other", "launch increment d0"]),
    "NO_SUCH_CONTEXT": (None, ["context use other"]),
    "CONTEXT_IN_USE": (None, ["context create as other; stream create as s1", "context destroy other"]),
    "GPU_ABANDONED": (None, ["set gpu-timeout 0.001", "launch spin 100000", "sync"]),
    "OUTSIDE_SUBMISSION": (None, ["run ../x.cush"]),
    "OUTSIDE_FOLDER": (None, ["output ../x.txt"]),  # in a shell confined as a notebook's is
    "INTERRUPTED": (None, ["alloc pinned 4KB", "sync"]),
    "INTERNAL_ERROR": (None, ["alloc pinned 4KB", "ls"]),
}
# Not from a command on the simulator: a profile file that cannot be used (at startup), the cuda backend with no
# GPU (only where there is none), a worker process that dies (the cuda backend's pipe, with the simulator behind
# it), and two the GPU side alone raises (a NUMA node the kernel will not bind host pages to; a call a GPU-side
# loop cannot make without the shell); and the prompt's `!N`, expanded before a line runs (test_repl).
# `cudashell grade` says of a check that ran past its time limit or whose process died (tests/test_grade.py), or
# whose process met one of the limits grading sets (tests/test_grade_limits.py).
ELSEWHERE = {"BAD_PROFILE", "BAD_CONFIG", "NO_GPU", "GPU_WORKER_DIED", "NUMA_BIND", "NOT_PLANNABLE",
             "NO_SUCH_HISTORY", "TIME_LIMIT", "CHECK_CRASHED", "MEMORY_LIMIT", "CPU_LIMIT", "OUTPUT_LIMIT"}
ELSEWHERE |= {"DISK_FULL"}  # a write on a full disk: tests/test_nothing_lost.py, on a fake one


def _rigged(code: str, shell: Shell, monkeypatch) -> None:
    """What the trigger needs beyond its lines: a Ctrl-C, a bug, a missing package, a loop that would run 10 s."""
    if code == "INTERRUPTED":
        def interrupted():
            raise KeyboardInterrupt
        monkeypatch.setattr(shell.backend, "device_sync", interrupted)
    elif code == "INTERNAL_ERROR":
        from cudashell.output import render

        def broken(*a, **k):
            raise ZeroDivisionError("a bug")
        monkeypatch.setattr(render, "human", broken)
        monkeypatch.setattr(render, "json_line", broken)
    elif code == "NOT_INSTALLED":
        monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
        monkeypatch.setitem(__import__("sys").modules, "matplotlib.pyplot", None)
    elif code == "RUNAWAY_KERNEL":
        from cudashell.simt import interp

        monkeypatch.setattr(interp, "RUNAWAY_ROUNDS", 1000)
        monkeypatch.setattr(interp, "RUNAWAY_SECONDS", 0.0)


@pytest.mark.parametrize("code", sorted(TRIGGERS))
def test_each_catalogued_code_is_what_its_situation_gives(code, tmp_path, monkeypatch):
    (tmp_path / "fails.cush").write_text("free nosuch\n")
    (tmp_path / "self.cush").write_text("run self.cush\n")
    (tmp_path / "latin1.cush").write_bytes("echo café\n".encode("latin-1"))
    (tmp_path / "big.cush").write_bytes(b"ls\n" * (1 << 19))  # 1.5 MiB
    monkeypatch.chdir(tmp_path)
    profile, lines = TRIGGERS[code]
    shell, codes = shell_on(profile, tmp_path, confined={"OUTSIDE_SUBMISSION": "submission",
                                                         "OUTSIDE_FOLDER": "cell"}.get(code))
    try:
        *before, last = lines
        for line in before:
            assert shell.execute(line), (line, shell.err.getvalue())
        _rigged(code, shell, monkeypatch)
        assert shell.execute(last) is False
        monkeypatch.undo()
        assert shell.last_error.code == code, shell.err.getvalue()
        assert code in codes and undocumented(codes) == set()
    finally:
        shell.close()


def test_the_codes_no_simulator_command_gives_are_given_where_they_arise(tmp_path):
    from cudashell.backends.choice import open_backend
    from cudashell.backends.cuda import CudaBackend
    from cudashell.frontends import config
    from tests.conftest import Cush

    assert [e.code for _, e in config.read(b"[shel]\n")[1]] == ["BAD_CONFIG"]  # a config line: a warning
    (tmp_path / "lab.json").write_text('{"bogus": 1}')
    with pytest.raises(ShellError) as e:
        open_backend("sim", str(tmp_path / "lab.json"))
    assert e.value.code == "BAD_PROFILE"
    if gpu_missing():  # here the cuda backend cannot start, and says why with its code
        with pytest.raises(ShellError) as e:
            open_backend("cuda")
        assert e.value.code == "NO_GPU"
    piped = Cush(CudaBackend(side="sim"))
    try:
        piped.ok("alloc pinned 4KB as p; alloc device 4KB as d")
        piped.backend.proc.kill()
        piped.backend.proc.wait()
        assert piped.fails("memcpy p d")["code"] == "GPU_WORKER_DIED"
    finally:
        piped.shell.close()


def test_the_catalogue_is_exactly_the_codes_given():
    assert set(TRIGGERS) | ELSEWHERE == set(SHELL_CODES)
    assert not set(TRIGGERS) & ELSEWHERE


def test_the_reference_lists_the_whole_catalogue():
    text = REFERENCE.read_text()
    for code, meaning in SHELL_CODES.items():
        assert f"| `{code}` | {meaning} |" in text


# ------------------------------------------------------------------ whatever comes out of real runs
def test_every_code_that_comes_out_of_real_runs_is_catalogued(real_runs):
    """Fuzzed lines, every shipped demo and the benches (conftest.real_runs): every code any of them reported,
    nested ones (a script's, a round's) too."""
    assert len(real_runs.codes) > 15  # the runs met refusals of many kinds
    assert undocumented(real_runs.codes) == set()
    assert "INTERNAL_ERROR" not in real_runs.codes
