"""What the GPU worker process costs per backend call: a round trip on the pipe, against the same driver
query made in-process (a GpuSide in this process, the reference measured in the same run). Timings the
shell reports are taken inside the worker, so this cost never shows in them; it shows in how long a
command takes at the prompt, and in `repeat`. Needs a GPU: `python benchmarks/worker_roundtrip.py`."""

from __future__ import annotations

import statistics
import sys
import time

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


def main() -> int:
    from cudashell.backends.cuda import CudaBackend, cuda_unavailable_reason

    why = cuda_unavailable_reason()
    if why:
        print(f"no GPU here ({why}): nothing to measure")
        return 0
    from cudashell.backends.gpu import GpuSide

    from cudashell.backends import cuda

    remote = CudaBackend()
    local = GpuSide()
    try:
        ping = per_call(remote.ping)
        spin, cuda.SPIN = cuda.SPIN, 200e-6
        ping_spin = per_call(remote.ping)
        cuda.SPIN = spin
        remote_query = per_call(lambda: remote.stream_idle(None))
        local_query = per_call(lambda: local.stream_idle(None))
    finally:
        remote.close()
        local.close()
    print(f"round trip, no driver call:        {ping * 1e6:7.1f} µs per call")
    print(f"  the same, looking 200 µs before sleeping: {ping_spin * 1e6:7.1f} µs per call")
    print(f"cuStreamQuery through the worker:  {remote_query * 1e6:7.1f} µs per call")
    print(f"cuStreamQuery in-process (ref):    {local_query * 1e6:7.1f} µs per call")
    print(f"ratio worker / in-process:         {remote_query / local_query:7.1f}x  "
          f"(the pipe adds {(remote_query - local_query) * 1e6:.1f} µs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
