"""The shell's own path per command, on the in-process simulator (no GPU needed): median CPU time per command of
2,000 runs through Shell.execute with the output in a StringIO, table output and JSON output, and how much of it
is the backend's — the same commands run again on a backend whose every call is timed, in the same run — so the
rest is the shell's (parse, dispatch, session bookkeeping, rendering, watchers). CPU time (`time.process_time`),
not wall time: other processes on a loaded machine move wall time, not this one's CPU time. Issue 38's target:
`memcpy p d 4 async` ≤ 25 µs through the shell on the development machine (46 µs before). `--json`: one JSON
object. `python benchmarks/command_path.py [--runs N] [--json]`."""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time

COMMANDS = (("memcpy p d 4 async", "memcpy p d 4 async"), ("ls, 10 buffers", "ls"),
            ("stream query 0", "stream query 0"), ("help", "help"))
SYNC_EVERY = 300  # an async copy queues work: a `sync` now and then keeps the queues short, outside the timing


class TimedBackend:
    """A backend whose method calls add their time to `spent`; everything else passes through. The calls are
    short, so the fast wall clock times them (a preemption inside one is rare, and the median drops it)."""

    def __init__(self, inner):
        self._inner = inner
        self.spent = 0.0

    def __getattr__(self, name):
        value = getattr(self._inner, name)
        if not callable(value):
            return value

        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return value(*a, **k)
            finally:
                self.spent += time.perf_counter() - t0
        return timed


def new_shell(backend, json_mode: bool):
    from cudashell.frontends.shell import Shell

    out = io.StringIO()
    shell = Shell(backend, out=out, err=out, json_mode=json_mode)
    shell.execute("alloc pinned 4KB as p; alloc device 4KB as d")
    for i in range(8):
        shell.execute(f"alloc device 4KB as x{i}")
    return shell, out


def per_command(shell, out, line: str, runs: int, timed: TimedBackend | None = None) -> list[float]:
    """CPU seconds of each of `runs` executions of `line`, the output emptied between them; with `timed`, the
    seconds its backend calls took in each instead."""
    times = []
    for i in range(runs):
        t0 = time.process_time()
        if timed is not None:
            timed.spent = 0.0
        ok = shell.execute(line)
        times.append(timed.spent if timed is not None else time.process_time() - t0)
        assert ok, out.getvalue()
        out.seek(0)
        out.truncate()
        if i % SYNC_EVERY == SYNC_EVERY - 1:
            shell.execute("sync")
    return times


def measure(runs: int) -> dict:
    from cudashell.backends.sim import SimBackend

    figures = {}
    for json_mode in (False, True):
        mode = "json" if json_mode else "table"
        shell, out = new_shell(SimBackend(), json_mode)
        timed = TimedBackend(SimBackend())
        tshell, tout = new_shell(timed, json_mode)
        try:
            for what, line in COMMANDS:
                per_command(shell, out, line, runs // 10)  # warm: caches, the first allocations
                whole = statistics.median(per_command(shell, out, line, runs))
                per_command(tshell, tout, line, runs // 10)
                backend = statistics.median(per_command(tshell, tout, line, runs, timed))
                figures[f"{what} ({mode})"] = {"command": line, "output": mode, "us": whole * 1e6,
                                               "backend_us": backend * 1e6, "shell_us": (whole - backend) * 1e6}
        finally:
            shell.close()
            tshell.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    a = parser.parse_args()
    figures = measure(a.runs)
    if a.json:
        print(json.dumps(figures))
        return 0
    print(f"through Shell.execute on the simulator, median CPU time per command of {a.runs:,} runs; the backend's "
          "calls timed alone in the same run (median), the rest is the shell's:")
    print(f"  {'command':28s} {'µs':>7s} {'backend':>8s} {'shell':>7s} {'shell share':>11s}")
    for what, f in figures.items():
        print(f"  {what:28s} {f['us']:7.1f} {f['backend_us']:8.1f} {f['shell_us']:7.1f} "
              f"{f['shell_us'] / f['us']:11.0%}")
    got = figures["memcpy p d 4 async (table)"]["us"]
    print(f"memcpy p d 4 async: {got:.1f} µs (issue 38's target 25 µs: {'met' if got <= 25 else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
