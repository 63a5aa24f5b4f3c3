"""Simulator speed targets (issue 2): a 10,000-command script in ≤ 1 s, and `cudashell -c ls` start to
exit in ≤ 0.5 s. Each is printed against a reference measured in the same run: the Python
interpreter starting and exiting (`python -c pass`, and importing numpy), so slow machines do not
mislead."""

from __future__ import annotations

import io
import statistics
import subprocess
import sys
import time

from cudashell.backends.sim import SimBackend
from cudashell.frontends.shell import Shell

CYCLE = ["alloc pinned 4KB as a", "alloc device 4KB as b", "fill a iota", "memcpy a b", "memcpy h2d a b async",
         "launch sum a a b", "sync", "memset b 0 1KB", "show a count 4", "free a b"]


def script(n: int) -> str:
    return "\n".join(CYCLE[i % len(CYCLE)] for i in range(n)) + "\n"


def time_script(n: int, json_mode: bool) -> float:
    shell = Shell(SimBackend(), out=io.StringIO(), err=io.StringIO(), json_mode=json_mode)
    items = shell.script_items(script(n))
    t = time.perf_counter()
    ok = shell.run_items(items)
    elapsed = time.perf_counter() - t
    assert ok and len(shell.session.history) == n
    return elapsed


def time_cmd(argv: list[str], reps: int = 7) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> int:
    n = 10_000
    table = time_script(n, json_mode=False)
    js = time_script(n, json_mode=True)
    cli = time_cmd([sys.executable, "-m", "cudashell", "--backend", "auto", "-c", "ls"])
    py = time_cmd([sys.executable, "-c", "pass"])
    np_ = time_cmd([sys.executable, "-c", "import numpy"])
    rows = [
        (f"{n}-command script, table output", table, 1.0),
        (f"{n}-command script, --json", js, 1.0),
        ("cudashell -c ls (start to exit)", cli, 0.5),
    ]
    print(f"{'what':<36} {'seconds':>8} {'target':>7}  verdict")
    for what, sec, target in rows:
        print(f"{what:<36} {sec:8.3f} {target:7.2f}  {'ok' if sec <= target else 'MISSED'}")
    print(f"reference: python -c pass {py:.3f} s, python -c 'import numpy' {np_:.3f} s; "
          f"cudashell -c ls = {cli / py:.1f}× bare python, {cli / np_:.1f}× python+numpy")
    print(f"per command: {table / n * 1e6:.0f} µs (table), {js / n * 1e6:.0f} µs (json)")
    return 0 if all(sec <= target for _, sec, target in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
