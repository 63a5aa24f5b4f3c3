"""Generated command lines on the simulator (two processes): no traceback, no INTERNAL_ERROR, a failed command
leaves the session as it was, and `free all` leaves nothing. The suite runs a short fuzz: 8,000 lines, so each
process opens a second shell (fuzzing.SESSION_LINES) and checks `free all` eight times. The long run is a
benchmark: `python benchmarks/fuzz.py 100000 2 0` is the 100,000 lines this test ran before (same seeds),
`python benchmarks/fuzz.py` the nightly 400,000 with the figures."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests import fuzzing

LINES, WORKERS = 8_000, 2


def _one(seed: int, lines: int, workdir: str) -> tuple:
    import cudashell.commands  # noqa: F401  (the registry the generator draws from)

    path = Path(workdir) / str(seed)
    path.mkdir()
    t = fuzzing.run(seed, lines, path)
    return t.lines, t.commands, t.crashes[:5], t.changed[:5], t.leaks[:5]


def test_generated_lines_break_no_invariant(tmp_path):
    assert LINES // WORKERS > fuzzing.SESSION_LINES  # every process runs more than one session
    with ProcessPoolExecutor(WORKERS) as pool:
        results = list(pool.map(_one, range(WORKERS), [LINES // WORKERS] * WORKERS, [str(tmp_path)] * WORKERS))
    assert sum(r[0] for r in results) == LINES
    assert all(r[1] > r[0] for r in results)  # `;` chains: more commands than lines
    for _, _, crashes, changed, leaks in results:
        assert crashes == [] and changed == [] and leaks == []
