"""A built-in command restores what it used, whatever happens (issue 36, item 10), and the smaller findings beside
it: each test fails without its fix. Ctrl-C is a KeyboardInterrupt raised by the N-th backend call a command makes
(every N in turn), through a backend that interrupts; after each, the session and the simulator must agree
(tests/fuzzing.py's invariants) and the next commands must work."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from cudashell.backends.base import CONTRACT
from cudashell.backends.profile import Profile
from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell
from tests import fuzzing
from tests.conftest import Cush

ROOT = Path(__file__).resolve().parent.parent


def accounting(backend) -> tuple:
    """The simulator's books: device and host memory in use, storage held, allocations alive."""
    return backend.device_used, backend.host_used, backend.budget.used, len(backend.live)


class Interrupting:
    """The backend, except that its `at`-th contract call raises KeyboardInterrupt (Ctrl-C in that call)."""

    def __init__(self, backend, at: int):
        vars(self).update(_backend=backend, _at=at, calls=0, hit=None)

    def __getattr__(self, name):
        value = getattr(self._backend, name)
        if name not in CONTRACT or not callable(value):
            return value

        def call(*args, **kwargs):
            vars(self)["calls"] += 1
            if self.calls == self._at:
                vars(self)["hit"] = name
                raise KeyboardInterrupt
            return value(*args, **kwargs)
        return call

    def __setattr__(self, name, value):
        setattr(self._backend, name, value)


def interrupted_everywhere(setup: str, command: str, step: int = 1) -> list:
    """Run `command` after `setup` once for every `step`-th backend call it makes, Ctrl-C in that call; what was
    broken after each: [(call number, call, [problems])]."""
    found, at = [], step
    while True:
        backend = SimBackend()
        shell = Shell(backend, "test", out=io.StringIO(), err=io.StringIO())
        assert shell.execute(setup)
        gate = Interrupting(backend, at)
        shell._frames[-1] = shell._frames[-1].but(backend=gate)
        shell.execute(command)
        shell._frames[-1] = shell._frames[-1].but(backend=backend)
        if gate.calls < at:  # it ran to its end: every call was interrupted once
            return found
        problems = [f"{inv}: {detail}" for inv, detail in fuzzing.broken_invariants(shell, backend, 0.0)]
        if backend.held is not None and shell.session.held is None:
            problems.append("the streams are held and the session does not know it")
        for line in ("alloc device 4KB as zz; launch fill zz 1; sync; free zz", "ls", "sync"):
            if not shell.execute(line):
                problems.append(f"`{line}` then failed: {shell.err.getvalue().strip()[-200:]}")
        if problems:
            found.append((at, gate.hit, problems))
        shell.close()
        at += step


def test_ctrl_c_anywhere_in_reset_leaves_no_stale_handle():
    setup = ("alloc pinned 4KB as p; alloc device 2MB as d; stream create; event record e; memcpy p d 4KB; "
             "alloc pageable 8KB as g; register g; pool create as q; alloc device 1MB async pool q as a")
    assert interrupted_everywhere(setup, "reset") == []


def test_ctrl_c_anywhere_in_bench_alloc_leaks_nothing():
    assert interrupted_everywhere("alloc pinned 4KB as p", "bench alloc device pinned registered async sizes 4MB") == []


def test_ctrl_c_anywhere_in_a_demo_leaves_nothing_held_or_alive():
    assert interrupted_everywhere("alloc pinned 4KB as p", "demo memory-api", step=3) == []


def test_calibrate_without_uva_skips_the_zero_copy_read_and_gives_everything_back():
    c = Cush(SimBackend(Profile.load("no-uva")))
    try:
        c.ok("alloc pinned 4KB as p; fill p 7")
        before = accounting(c.backend)
        d = c.ok("calibrate")
        assert "kernel_zero_copy_read" not in d["profile"] and "kernel_device_read" in d["profile"]
        assert "unified addressing" in d["skipped"]["kernel_zero_copy_read"]
        assert accounting(c.backend) == before
        assert c.ok("alloc device 4KB as d; launch fill d 1; memcpy d p 4KB; show p count 1")["values"] == [1]
    finally:
        c.shell.close()


def test_calibrate_under_uva_still_measures_the_zero_copy_read(sim):
    d = sim.ok("calibrate")
    assert d["profile"]["kernel_zero_copy_read"] > 0 and d["skipped"] == {}


@pytest.mark.parametrize("bench", ["bench zerocopy 2^10..2^12", "bench memcpy h2d registered sizes 64KB,1MB reps 2",
                                   "bench memcpy bidir pinned sizes 64KB reps 2", "bench latency rounds 10"])
def test_a_bench_leaves_the_storage_accounting_as_it_found_it(sim, bench):
    """A small device buffer alive keeps the small-block pool: the bench's freed blocks kept their bytes (1–4 MiB
    of storage) until `free all`."""
    sim.ok("alloc device 4KB as d; alloc pinned 4KB as p; fill p 3; memcpy p d 4KB")
    before = accounting(sim.backend)
    sim.ok(bench)
    assert accounting(sim.backend) == before
    sim.ok("alloc device 64KB as e")
    assert sim.ok("checksum e")["checksums"]["e"] == 0  # no bench's bytes turn up in the next buffer


@pytest.mark.parametrize("bench", ["bench memcpy sizes 4KB reps 2", "bench zerocopy 2^10..2^11", "bench alloc device",
                                   "bench latency rounds 10", "bench overlap streams 1", "calibrate"])
def test_a_measurement_does_not_start_while_the_streams_are_held(sim, bench):
    sim.ok("hold")
    before = accounting(sim.backend)
    assert sim.fails(bench)["code"] == "STREAMS_HELD"
    assert accounting(sim.backend) == before
    sim.ok("release")


def test_an_absurd_spin_is_refused_by_name_and_later_times_stay_right(sim):
    e = sim.fails("launch spin 9223372036854775807")
    assert e["code"] == "USAGE" and "3_600_000_000 µs" in e["message"]
    assert sim.fails("launch spin -5")["code"] == "USAGE"
    sim.ok("launch spin 3600000000; sync")
    rows = sim.ok("bench latency rounds 10")["rows"]
    assert all(r["median_us"] > 0 for r in rows)
    assert sim.ok("bench memcpy h2d pinned sizes 4KB reps 2")["rows"][0]["gbps"] > 0


def test_a_hex_spin_exports_and_an_explainer_failure_is_its_own(sim, tmp_path, monkeypatch):
    sim.ok("launch spin 0x10")
    sim.ok(f"export c {tmp_path / 'x.cu'}")
    assert "(long long)16 * clock_khz / 1000" in (tmp_path / "x.cu").read_text()

    from cudashell.export import cemit

    def broken(*args):
        raise ValueError("a bug of the explainer's")
    monkeypatch.setattr(cemit, "explain", broken)
    sim.ok("explain on")
    launched = sim.ok("launch spin 0x10")  # the launch ran, and says so
    assert launched["kernel"] == "spin"
    assert "INTERNAL_ERROR: `explain` could not write the C of `launch spin 0x10` (the command ran): " \
           "ValueError: a bug of the explainer's" in sim.err.getvalue()


def test_printf_dropped_lines_are_counted_once(sim, tmp_path):
    (tmp_path / "p.cu").write_text('#include <cstdio>\n__global__ void say() { printf("line %d\\n", '
                                   'blockIdx.x * blockDim.x + threadIdx.x); }\n')
    sim.ok(f"kernel load {tmp_path / 'p.cu'}")
    objs = sim.run("launch say grid 5 block 1000; sync")
    out = next(o["result"] for o in objs if o["ok"] and o["result"].get("result") == "kernel_output")
    assert len(out["lines"]) == 4096 and out["dropped"] == 5000 - 4096


@pytest.mark.parametrize("text, code", [("alloc pinned 4KB as p\nrepeat 2 <<< fill p 1\n", "USAGE"),
                                        ('alloc pinned 4KB as p\necho "abc\n', "USAGE")])
def test_a_script_that_does_not_parse_says_its_code_in_the_summary(tmp_path, text, code):
    (tmp_path / "unterminated.cush").write_text(text)
    r = subprocess.run([sys.executable, "-m", "cudashell", "--backend", "sim", "--quiet", "-c",
                        "run unterminated.cush"], cwd=tmp_path, capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert f"unterminated.cush: {code}: 1 syntax error; nothing was run" in r.stderr.splitlines()
    assert r.returncode == 1


def test_a_failing_expect_equal_leaves_the_pending_marks_alone(sim):
    sim.ok("alloc pinned 4KB as p; alloc pinned 4KB as q; alloc device 4KB as d; fill p 1; memcpy p d 4KB async")
    sim.ok("units 4KB")  # time passes: the copy is done, and the session has not looked yet
    before = fuzzing.snapshot(sim.shell.session)
    assert before[0][2][-1], "d is still marked pending"
    assert sim.fails("expect equal d q")["code"] == "EXPECT_FAILED"
    assert fuzzing.snapshot(sim.shell.session) == before
    assert sim.ok("expect equal d p")["passed"]  # a passing one looks, as `compare` does
    assert not fuzzing.snapshot(sim.shell.session)[0][2][-1]


@pytest.mark.parametrize("size", ["٤٠٩٦", "４０９６", "４KB", "٢^١٠", "۴096"])
def test_sizes_take_ascii_digits_only(sim, size):
    assert sim.fails(f"alloc pinned {size}")["code"] == "USAGE"
    assert sim.fails(f"launch spin {size}")["code"] == "USAGE"


def test_ctrl_c_is_held_through_clean_up_and_a_second_one_is_not():
    import signal

    from cudashell.model.scratch import interrupts_held

    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # another test's backend may have set its own
    try:
        _held_once_then_not(interrupts_held)
    finally:
        signal.signal(signal.SIGINT, before)


def _held_once_then_not(interrupts_held):
    import os
    import signal

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after the first")  # the clean-up went on
    assert done == ["after the first"]
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            os.kill(os.getpid(), signal.SIGINT)
            done.append("after the second")
    assert done == ["after the first"] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_what_the_fuzzer_found_is_refused_with_a_code(sim):
    """What benchmarks/fuzz.py found (4 seeds × 50,000 lines): a reference name too long for the OS to look at was an
    INTERNAL_ERROR; `trace export FOLDER force` settled the session's pending work before failing to write."""
    assert sim.fails("compare ref " + "x" * 300)["code"] == "NO_REFERENCE"
    sim.ok("alloc pinned 4KB as p; alloc device 4KB as d; memcpy p d 4KB async; units 4KB")
    before = fuzzing.snapshot(sim.shell.session)
    e = sim.fails("trace export / force")
    assert e["code"] == "IO_ERROR" and "it is a folder" in e["message"]
    assert fuzzing.snapshot(sim.shell.session) == before
