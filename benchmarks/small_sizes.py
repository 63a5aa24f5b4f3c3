"""Issue 11's small-size benchmark, for one device run: the plain-C reference (ref_small.cu, compiled here with
nvcc) and cudashell measure the same points with the same method in the same run, and each ratio is printed.

  - gated pinned H2D at 4 KiB, 64 KiB and 1 MiB through `bench memcpy`: target ≥ 0.90 of C's rate;
  - `bench latency`'s points beside C's (shown, no target);
  - `repeat 10000 <<< memcpy h2d p d 4 >>>`: time per round ≤ 1.5× a raw PyCUDA loop of the same copy;
  - the command path for a 4-byte async copy, end to end (parse, worker round trip, render): median ≤ 40 µs.
Needs a GPU: `python benchmarks/small_sizes.py`; exits 1 when a target is missed."""

from __future__ import annotations

import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import bind, run

from cudashell.backends.cuda import CudaBackend
from cudashell.frontends.shell import Shell

SIZES = (4 << 10, 64 << 10, 1 << 20)
HERE = Path(__file__).resolve().parent


def c_reference() -> tuple[dict, dict]:
    exe = Path(tempfile.mkdtemp()) / "ref_small"
    subprocess.run(["nvcc", "-O2", "-o", str(exe), str(HERE / "ref_small.cu")], check=True)
    out = subprocess.run([str(exe), *map(str, SIZES)], check=True, capture_output=True, text=True).stdout
    gated, latency = {}, {}
    for line in out.splitlines():
        if line.startswith("gated"):
            _, nbytes, gbps, us = line.split()
            gated[int(nbytes)] = (float(gbps), float(us))
        elif line.startswith("latency|"):
            _, name, med, p10, p90 = line.split("|")
            latency[name] = (float(med), float(p10), float(p90))
    return gated, latency


def raw_pycuda_per_copy(n: int) -> float:
    """The same 4-byte synchronous H2D copy as a plain PyCUDA loop, in this process (its own context)."""
    import numpy as np
    import pycuda.driver as cuda

    cuda.init()
    ctx = cuda.Device(0).make_context()
    try:
        host = cuda.pagelocked_empty(1024, np.uint8)
        dev = cuda.mem_alloc(4096)
        for _ in range(200):
            cuda.memcpy_htod(dev, host[:4])
        t0 = time.perf_counter()
        for _ in range(n):
            cuda.memcpy_htod(dev, host[:4])
        per = (time.perf_counter() - t0) / n
        dev.free()
        return per
    finally:
        ctx.pop()
        ctx.detach()


def command_path(shell: Shell, n: int = 3000) -> float:
    """Median seconds of `memcpy p d 4 async` through Shell.execute, rendered as a table (what a user sees)."""
    shell.session.settings["format"] = "table"
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        shell.execute("memcpy p d 4 async")
        times.append(time.perf_counter() - t0)
        if i % 500 == 499:
            shell.execute("sync")  # settle the trace now and then, as a session would
            shell.out.seek(0)
            shell.out.truncate()
    shell.session.settings["format"] = "json"
    return statistics.median(times[200:])


def main() -> int:
    print(bind())
    c_gated, c_latency = c_reference()
    out = io.StringIO()
    backend = CudaBackend()
    shell = Shell(backend, out=out, err=sys.stderr, json_mode=True)
    try:
        rows = run(shell, out, f"bench memcpy h2d pinned sizes {','.join(map(str, SIZES))} reps 9")["rows"]
        mine = {r["size"]: (r["gbps"], r["us_per_copy"]) for r in rows}
        lat = {r["what"]: (r["median_us"], r["p10_us"], r["p90_us"]) for r in run(shell, out, "bench latency")["rows"]}
        run(shell, out, "alloc pinned 4KB as p; alloc device 4KB as d")
        rep = run(shell, out, "repeat 10000 <<< memcpy h2d p d 4 >>>")
        per_round = rep["plan"]["host_seconds"] / rep["plan"]["rounds"]
        path = command_path(shell)
    finally:
        shell.close()
    raw = raw_pycuda_per_copy(10000)
    ok = True
    print(f"device: {backend.info.name}; engine times: {backend.tracing or backend.tracing_why}")
    print("\ngated pinned H2D through `bench memcpy` (target ≥ 0.90 of C)")
    print(f"{'size':>8} {'C GB/s':>8} {'shell GB/s':>11} {'C µs/copy':>10} {'shell µs/copy':>14} {'ratio':>6}")
    for size in SIZES:
        (cg, cu), (sg, su) = c_gated[size], mine[size]
        ok &= sg / cg >= 0.90
        print(f"{size >> 10:>6}Ki {cg:8.2f} {sg:11.2f} {cu:10.2f} {su or 0:14.2f} {sg / cg:6.2f}")
    print("\n`bench latency` beside C (µs: median, p10–p90)")
    for name, (cm, c10, c90) in c_latency.items():
        m, p10, p90 = lat[name]
        print(f"  {name:<26} C {cm:7.2f} ({c10:.2f}–{c90:.2f})   shell {m:7.2f} ({p10:.2f}–{p90:.2f})   {m / cm:5.2f}×")
    ratio = per_round / raw
    ok &= ratio <= 1.5
    print(f"\nrepeat 10000 <<< memcpy h2d p d 4 >>>: {per_round * 1e6:.2f} µs a round; raw PyCUDA loop "
          f"{raw * 1e6:.2f} µs; ratio {ratio:.2f} (target ≤ 1.5); GPU {rep['plan']['gpu_seconds'] * 1e3:.2f} ms "
          f"({rep['plan']['source']})")
    ok &= path <= 40e-6
    print(f"command path, `memcpy p d 4 async` end to end: median {path * 1e6:.1f} µs (target ≤ 40)")
    print("all targets met" if ok else "a target was MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
