"""100,000 generated command lines on the simulator (two processes, 50,000 each): no traceback, no
INTERNAL_ERROR, a failed command leaves the session as it was, and `free all` leaves nothing. More lines,
and the figures, in benchmarks/fuzz.py."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from tests import fuzzing

LINES, WORKERS = 100_000, 2


def _one(seed: int, lines: int, workdir: str) -> tuple:
    import cudashell.commands  # noqa: F401  (the registry the generator draws from)

    path = Path(workdir) / str(seed)
    path.mkdir()
    t = fuzzing.run(seed, lines, path)
    return t.lines, t.commands, t.crashes[:5], t.changed[:5], t.leaks[:5]


def test_generated_lines_break_no_invariant(tmp_path):
    with ProcessPoolExecutor(WORKERS) as pool:
        results = list(pool.map(_one, range(WORKERS), [LINES // WORKERS] * WORKERS, [str(tmp_path)] * WORKERS))
    assert sum(r[0] for r in results) >= LINES
    for _, _, crashes, changed, leaks in results:
        assert crashes == [] and changed == [] and leaks == []
