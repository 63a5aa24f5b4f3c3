"""Nightly-style fuzzing: many generated lines on the simulator, in parallel, with the figures the closing
notes quote (lines, commands, crashes, invariant violations, lines per second) and the first examples of
each kind of failure. `python benchmarks/fuzz.py [LINES] [PROCESSES] [FIRST_SEED]`. The suite's
tests/test_fuzz.py runs a short fuzz (8,000 lines, seeds 0 and 1); `python benchmarks/fuzz.py 100000 2 0` is the
100,000-line run it used to be."""

from __future__ import annotations

import os
import resource
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import fuzzing  # noqa: E402


def one(seed: int, lines: int, workdir: str) -> fuzzing.Tally:
    import cudashell.commands  # noqa: F401

    path = Path(workdir) / str(seed)
    path.mkdir()
    return fuzzing.run(seed, lines, path)


def main() -> int:
    lines = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000
    procs = int(sys.argv[2]) if len(sys.argv) > 2 else os.cpu_count() or 1
    first = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, ProcessPoolExecutor(procs) as pool:
        tallies = list(pool.map(one, range(first, first + procs), [lines // procs] * procs, [d] * procs))
    wall = time.perf_counter() - t0
    total = fuzzing.Tally()
    for t in tallies:
        total.lines += t.lines
        total.commands += t.commands
        total.crashes += t.crashes
        total.changed += t.changed
        total.leaks += t.leaks
    print(f"lines {total.lines}, commands {total.commands}, in {wall:.1f} s ({total.lines / wall:.0f} lines/s, "
          f"{procs} processes)")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(f"peak memory of one fuzzing process: {peak} MiB (the simulator's storage budget is "
          f"{fuzzing.STORAGE >> 20} MiB)")
    print(f"crashes {len(total.crashes)}, failed commands that changed the session {len(total.changed)}, "
          f"`free all` leftovers {len(total.leaks)}")
    for kind in ("crashes", "changed", "leaks"):
        for example in getattr(total, kind)[:5]:
            print(f"  {kind}: {str(example)[:300]}")
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
