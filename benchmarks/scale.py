"""Per-command cost as a session grows (issue 22, item 6): what the last thousands of N commands cost against
the first thousands of the same run — pinned allocations (the pin-limit check), commands with `explain on`, streams and
events. Target: within 2× at every N (a cost that grows with the number of buffers, streams or history entries is
quadratic for a script). A benchmark, not a test: `python benchmarks/scale.py [--quick]`."""

from __future__ import annotations

import argparse
import io
import statistics
import time

from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell

BLOCK = 1000
CASES = [  # name, setup, the command repeated, total N, N with --quick
    ("pinned alloc", [], "alloc pinned 512B", 100_000, 20_000),
    ("explain on: alloc device", ["explain on"], "alloc device 512B", 100_000, 10_000),
    ("stream create", [], "stream create", 10_000, 5_000),
    ("event record", [], "event record e{i}", 10_000, 5_000),
]


def per_command(shell: Shell, command: str, start: int) -> float:
    """Seconds a command, over one block of BLOCK commands run as a script (`{i}` numbers each)."""
    items = shell.script_items("\n".join(command.format(i=start + k) for k in range(BLOCK)) + "\n")
    t = time.perf_counter()
    ok = shell.run_items(items)
    assert ok, shell.last_error
    return (time.perf_counter() - t) / BLOCK


def measure(setup: list[str], command: str, total: int) -> tuple[float, float]:
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO())
    for line in setup:
        shell.execute(line)
    blocks = [per_command(shell, command, b * BLOCK) for b in range(total // BLOCK)]
    shell.close()
    # the median of three blocks at each end (after a first one that warms up), so one garbage collection or one
    # busy moment of the machine is not taken for a trend
    return statistics.median(blocks[1:4]), statistics.median(blocks[-3:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller N")
    a = ap.parse_args()
    print(f"{'case':<28}{'N':>9}{'first 1k µs/cmd':>17}{'last 1k µs/cmd':>16}{'last/first':>12}  verdict")
    failed = False
    for name, setup, command, total, quick in CASES:
        n = quick if a.quick else total
        first, last = measure(setup, command, n)
        ratio = last / first
        ok = ratio <= 2.0
        failed |= not ok
        print(f"{name:<28}{n:>9}{first * 1e6:>17.1f}{last * 1e6:>16.1f}{ratio:>12.2f}  {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
