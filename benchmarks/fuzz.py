"""The in-process fuzzer: generated and mutated command lines on the simulator (tests/fuzzing.py), seeds run in
parallel, each in a temporary folder of its own (commands that write a relative path write there). Prints what the
closing notes quote: lines and commands, lines per second, the crash classes (an INTERNAL_ERROR or an exception
escaping the shell, by exception type and the place in cudashell that raised it, with a line that reproduces each),
the invariant violations by invariant, and the slowest lines. Exit status 1 when anything broke.

`python benchmarks/fuzz.py [--seeds 4] [--lines 50000] [--first-seed 0] [--processes N]`: the issue's run is the
default, 4 seeds × 50,000 lines. tests/test_fuzz.py runs a short one in the suite."""

from __future__ import annotations

import argparse
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
    import cudashell.commands  # noqa: F401  (the registry the generator draws from)

    path = Path(workdir) / str(seed)
    path.mkdir()
    return fuzzing.run(seed, lines, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--lines", type=int, default=50_000, help="lines per seed")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--processes", type=int, default=min(4, os.cpu_count() or 1))
    a = ap.parse_args()
    seeds = range(a.first_seed, a.first_seed + a.seeds)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d, ProcessPoolExecutor(a.processes) as pool:
        tallies = list(pool.map(one, seeds, [a.lines] * a.seeds, [d] * a.seeds))
    wall = time.perf_counter() - t0
    total = fuzzing.Tally()
    for t in tallies:
        total.add(t)
    per_process = total.lines / sum(t.seconds for t in tallies)
    print(f"seeds {list(seeds)}, lines {total.lines}, commands {total.commands}, in {wall:.0f} s: "
          f"{total.lines / wall:.0f} lines/s ({per_process:.0f} a process, {a.processes} processes)")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    print(f"peak memory of one fuzzing process: {peak} MiB (the simulator's storage budget is "
          f"{fuzzing.STORAGE >> 20} MiB)")
    classes = total.crash_classes()
    print(f"crash classes: {len(classes)} ({len(total.crashes)} crashes)")
    for cls, n in classes.most_common():
        line = next(line for line, c in total.crashes if c == cls)
        print(f"  {n:6}  {cls}\n          e.g. {line[:200]!r}")
    invariants = total.invariant_classes()
    violations = len(total.broken) + len(total.changed) + len(total.leaks)
    print(f"invariant violations: {violations}")
    for inv, n in invariants.most_common():
        line, _, detail = next(b for b in total.broken if b[1] == inv)
        print(f"  {n:6}  {inv}\n          e.g. after {line[:160]!r}: {detail[:160]}")
    for kind, what in (("changed", "a failed command changed the session"), ("leaks", "`free all` left memory")):
        if getattr(total, kind):
            print(f"  {len(getattr(total, kind)):6}  {what}\n          e.g. {str(getattr(total, kind)[0])[:200]}")
    print("slowest lines: " + "; ".join(f"{s:.2f} s {line[:60]!r}" for s, line in total.slowest))
    return 1 if total.violations else 0


if __name__ == "__main__":
    sys.exit(main())
