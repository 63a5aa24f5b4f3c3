"""Generated and mutated command lines on the simulator (two processes): no traceback, no INTERNAL_ERROR, and
after every command the invariants hold (tests/fuzzing.py: the simulator's accounting equals what is alive, every
named buffer is alive and nothing alive is unnamed, virtual time never goes backwards, a failed command leaves the
session as it was), and `free all` leaves nothing. The suite runs a short fuzz: 5,000 lines, so each process opens
a second shell (fuzzing.SESSION_LINES). The long run is a benchmark: `python benchmarks/fuzz.py` (4 seeds × 50,000
lines, the crash classes and violations summarised)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests import fuzzing

LINES, WORKERS = 5_000, 2


def _one(seed: int, lines: int, workdir: str) -> tuple:
    import cudashell.commands  # noqa: F401  (the registry the generator draws from)

    path = Path(workdir) / str(seed)
    path.mkdir()
    t = fuzzing.run(seed, lines, path)
    return t.lines, t.commands, t.crashes[:5], t.changed[:5], t.leaks[:5], t.broken[:5]


def test_generated_lines_break_no_invariant(tmp_path):
    assert LINES // WORKERS > fuzzing.SESSION_LINES  # every process runs more than one session
    with ProcessPoolExecutor(WORKERS) as pool:
        results = list(pool.map(_one, range(WORKERS), [LINES // WORKERS] * WORKERS, [str(tmp_path)] * WORKERS))
    assert sum(r[0] for r in results) == LINES
    assert all(r[1] > r[0] for r in results)  # `;` chains: more commands than lines
    for _, _, crashes, changed, leaks, broken in results:
        assert crashes == [] and changed == [] and leaks == [] and broken == []


def test_the_invariants_see_a_leak_a_stale_name_and_time_going_back(sim):
    """The checker itself: each invariant, broken by hand, is reported."""
    backend, session = sim.backend, sim.shell.session
    sim.ok("alloc pinned 4KB as p; alloc device 4KB as d")
    assert fuzzing.broken_invariants(sim.shell, backend, backend.now) == []
    assert [inv for inv, _ in fuzzing.broken_invariants(sim.shell, backend, backend.now + 1)] == \
        ["virtual time went backwards"]
    leaked = session.buffers.pop("d")
    assert [inv for inv, _ in fuzzing.broken_invariants(sim.shell, backend, backend.now)] == \
        ["memory alive that no buffer names"]
    session.buffers["d"] = leaked
    backend.free(leaked)
    assert [inv for inv, _ in fuzzing.broken_invariants(sim.shell, backend, backend.now)] == \
        ["a named buffer is not alive on the backend"]
    backend.device_used += 1
    assert "memory in use ≠ what is alive" in [inv for inv, _ in fuzzing.broken_invariants(sim.shell, backend, 0)]
