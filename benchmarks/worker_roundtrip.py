"""What the GPU worker process costs per backend call, and where a command's time goes: a round trip on the
pipe, a driver query and a 4-byte async copy through the worker against the same in-process (a GpuSide in this
process, measured in the same run), and the whole command through the shell — beside the same command on the
in-process simulator (the shell's own Python path, with a backend that costs little) and the round trips each
command made. Timings the shell reports are taken inside the worker, so this cost never shows in them; it shows
in how long a command takes at the prompt, and in `repeat`; issue 38 wants a command's GPU path within 1.3× of the
simulator's on the same host. Needs a GPU: `python benchmarks/worker_roundtrip.py`."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # small_sizes, beside it

N = 3000


def per_call(fn, n: int = N) -> float:
    """Median of 5 runs of n calls, in seconds per call."""
    runs = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - t0) / n)
    return statistics.median(runs)


def python_speed() -> float:
    """A pure-Python loop's speed here against the development machine's (0.159 s, Python 3.11): host Python
    speed, which bounds every shell-side figure."""
    def loop() -> float:
        t0, total = time.perf_counter(), 0
        for i in range(3_000_000):
            total += i * i % 7
        return time.perf_counter() - t0

    return 0.159 / min(loop() for _ in range(3))


def main() -> int:
    from cudashell.backends.cuda import CudaBackend, cuda_unavailable_reason

    why = cuda_unavailable_reason()
    if why:
        print(f"no GPU here ({why}): nothing to measure")
        return 0
    import io

    from cudashell.backends.gpu import GpuSide
    from cudashell.backends.sim import SimBackend
    from cudashell.frontends.shell import Shell
    from cudashell.model.session import Buffer

    remote = CudaBackend()
    local = GpuSide()
    out = io.StringIO()
    shell = Shell(remote, out=out, err=out)
    try:
        ping = per_call(remote.ping)
        remote_query = per_call(lambda: remote.stream_idle(None))
        local_query = per_call(lambda: local.stream_idle(None))
        shell.execute("alloc pinned 4KB as p; alloc device 4KB as d")
        p, d = shell.session.buffers["p"], shell.session.buffers["d"]
        remote_copy = per_call(lambda: remote.memcpy(p, 0, d, 0, 4, None, True), 1000)
        lp, ld = (Buffer(n, k, 4096, frozenset(), a.host_ptr, a.device_ptr, a.handle)
                  for n, k, a in (("p", "pinned", local.alloc("pinned", 4096, frozenset())[0]),
                                  ("d", "device", local.alloc("device", 4096, frozenset())[0])))
        local_copy = per_call(lambda: local.memcpy(lp, 0, ld, 0, 4, None, True), 1000)

        sim_out = io.StringIO()
        sim = Shell(SimBackend(), out=sim_out, err=sim_out)
        sim.execute("alloc pinned 4KB as p; alloc device 4KB as d")
        trips = {}

        def through_shell(line: str, n: int = 2000, blocks: int = 10) -> tuple[float, float]:
            """Median seconds of `line` through Shell.execute with table output, one run at a time, on the GPU and
            on the in-process simulator, in turns of n / blocks runs (the host's drift falls on both sides of the
            ratio); the worker round trips it made (on the GPU) are kept in `trips`."""
            times = {"gpu": [], "sim": []}
            calls = remote.trips
            for block in range(blocks):
                sides = (("gpu", shell, out), ("sim", sim, sim_out))
                for side, sh, o in sides if block % 2 == 0 else sides[::-1]:
                    for _ in range(n // blocks):
                        t0 = time.perf_counter()
                        sh.execute(line)
                        times[side].append(time.perf_counter() - t0)
                        o.seek(0)
                        o.truncate()
            trips[line] = (remote.trips - calls) / len(times["gpu"])
            return statistics.median(times["gpu"]), statistics.median(times["sim"])

        whole = through_shell("memcpy p d 4 async")
        for i in range(8):
            shell.execute(f"alloc device 4KB as x{i}")
            sim.execute(f"alloc device 4KB as x{i}")
        ls = through_shell("ls")
        query = through_shell("stream query 0")
        shell.execute("sync")
        sim.close()
        from small_sizes import raw_pycuda_per_copy

        raw = raw_pycuda_per_copy(10000)
        shell.execute("repeat 100 <<< memcpy h2d p d 4 >>>")
        t0 = time.perf_counter()
        shell.execute("repeat 10000 <<< memcpy h2d p d 4 >>>")
        per_round = (time.perf_counter() - t0) / 10000
    finally:
        shell.close()
        local.close()
    print(f"round trip, no driver call:              {ping * 1e6:7.1f} µs per call")
    print(f"cuStreamQuery through the worker:        {remote_query * 1e6:7.1f} µs (in-process {local_query * 1e6:.1f})")
    print(f"4-byte async copy through the worker:    {remote_copy * 1e6:7.1f} µs (in-process GpuSide "
          f"{local_copy * 1e6:.1f}: events, CUPTI tag, Timing)")
    print(f"this host runs Python at {python_speed():.2f}× the speed of the machine the targets' shell path was "
          "written on (a pure-Python loop)")
    print("through Shell.execute, table output, median of 2,000 (issue 23's targets), beside the same command on the "
          "in-process simulator (the two in turns of 200), and the worker round trips it made:")
    for (what, line), (got, floor), target in zip(
            (("memcpy p d 4 async", "memcpy p d 4 async"), ("ls, 10 buffers", "ls"), ("stream query 0", "stream query 0")),
            (whole, ls, query), (30e-6, 60e-6, 15e-6)):
        print(f"  {what:20s} {got * 1e6:7.1f} µs  (target {target * 1e6:.0f}: {'met' if got <= target else 'missed'}; "
              f"simulator {floor * 1e6:.1f} µs: GPU ÷ simulator {got / floor:.2f}× (issue 38's target ≤ 1.3×: "
              f"{'met' if got <= 1.3 * floor else 'missed'}); {trips[line]:.2f} round trips)")
    print(f"  repeat 10000 <<< memcpy h2d p d 4 >>>: {per_round * 1e6:.2f} µs a round, raw PyCUDA loop "
          f"{raw * 1e6:.2f} µs: {per_round / raw:.2f}× (target 1.2×: {'met' if per_round <= 1.2 * raw else 'missed'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
