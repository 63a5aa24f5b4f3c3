"""Users' CUDA C kernels on the simulator (issue 21): on this machine's CPU, in one run, a vector add over 2^24
ints in ≤ 1 s, a 256-thread shared-memory reduction over 2^22 ints in ≤ 2 s and a 512×512 tiled transpose in
≤ 1 s, each at ≥ 1,000× the threads per second of Numba's CUDA simulator on the same kernel written for it
(measured in the same run, in a subprocess, on a smaller grid: it runs one OS thread per CUDA thread; the
kernels written for it are in sim_kernels_numba.py), and a launch's own working memory within twice the bytes
its buffers hold (tracemalloc, which sees NumPy's buffers, around a second launch).

Ours runs through the interpreter directly (`cudashell.simt.launch.run`); a launch's time includes taking in
its buffers' bytes, as the shell's launch does, but not compiling the source. `--quick` runs smaller sizes
and judges only the ratios and the memory. Numba is a benchmark-only dependency: `pip install .[bench]`."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np

SRC = r'''
__global__ void vadd(const int *a, const int *b, int *c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void reduce(const int *in, int *out, int n) {
  __shared__ int s[256];
  unsigned t = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  s[t] = i < n ? in[i] : 0;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, s[0]);
}

#define TILE 32
#define ROWS 8
__global__ void transpose(const float *in, float *out, int w, int h) {
  __shared__ float tile[TILE][TILE + 1];
  int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < w && y + j < h) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x; y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS)
    if (x < h && y + j < w) out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
'''

# (kernel, our size, numba's size, our size with --quick, numba's with --quick, seconds target)
# sizes: elements for vadd/reduce, the side of the square matrix for transpose
CASES = [("vadd", 1 << 24, 1 << 13, 1 << 20, 1 << 11, 1.0),
         ("reduce", 1 << 22, 1 << 12, 1 << 18, 1 << 10, 2.0),
         ("transpose", 512, 128, 256, 64, 1.0)]
RATIO, MEMORY = 1000.0, 2.0
BLOCK = {"vadd": (256, 1, 1), "reduce": (256, 1, 1), "transpose": (32, 8, 1)}


def grid_of(kernel: str, size: int) -> tuple:
    if kernel == "transpose":
        return (size // 32, size // 32, 1)
    return (-(-size // 256), 1, 1)


def threads_of(kernel: str, size: int) -> int:
    g, b = grid_of(kernel, size), BLOCK[kernel]
    return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def label(kernel: str, size: int) -> str:
    if kernel == "transpose":
        return f"{size}×{size}"
    return f"2^{size.bit_length() - 1}"


def inputs(kernel: str, size: int, rng) -> tuple[dict, list, object]:
    """Host arrays by parameter (in order), scalar arguments, and a check of the arrays after the launch."""
    if kernel == "vadd":
        a = rng.integers(-2**31, 2**31, size, dtype=np.int64).astype(np.int32)
        b = rng.integers(-2**31, 2**31, size, dtype=np.int64).astype(np.int32)
        want = a + b  # wraps, as int does on the GPU

        def check(out):
            assert np.array_equal(out["c"], want), "vadd: wrong sums"
        return {"a": a, "b": b, "c": np.zeros(size, np.int32)}, [np.int32(size)], check
    if kernel == "reduce":
        x = rng.integers(-100, 101, size, dtype=np.int64).astype(np.int32)
        want = int(x.astype(np.int64).sum())

        def check(out):
            assert int(out["out"][0]) == want, f"reduce: {int(out['out'][0])}, not {want}"
        return {"in": x, "out": np.zeros(1, np.int32)}, [np.int32(size)], check
    m = rng.random((size, size), dtype=np.float32)

    def check(out):
        assert np.array_equal(out["out"].reshape(size, size), m.T), "transpose: wrong matrix"
    return {"in": m.ravel(), "out": np.zeros(size * size, np.float32)}, [np.int32(size), np.int32(size)], check


# ---- ours ----------------------------------------------------------------------------------------------------

def launch(kern, arrays: dict, scalars: list, grid: tuple, block: tuple):
    """One launch over fresh regions holding copies of `arrays`: (regions by name, report)."""
    from cudashell.simt.launch import run
    from cudashell.simt.memory import Region

    program, fn = kern.handle
    regions, addr = {}, 0x10000000
    for name, arr in arrays.items():
        raw = arr.view(np.uint8)
        regions[name] = Region(name, addr, raw.nbytes, "device", read=lambda raw=raw: raw.copy())
        addr += (raw.nbytes // 0x10000000 + 1) * 0x10000000
    starts, values = iter(r.start for r in regions.values()), []
    it = iter(scalars)
    for q in kern.params:
        values.append(next(starts) if q.is_buffer else next(it))
    report = run(program, fn, values, grid, block, 0, list(regions.values()))
    return regions, report


def results(regions: dict, arrays: dict) -> dict:
    return {name: (r.data[:r.size].view(arrays[name].dtype) if r.data is not None else arrays[name])
            for name, r in regions.items()}


def ours(kernels: dict, kernel: str, size: int, rng) -> dict:
    arrays, scalars, check = inputs(kernel, size, rng)
    grid, block = grid_of(kernel, size), BLOCK[kernel]
    runs = []  # the first launch (cold: the process's first touch of its buffers' pages), then three warm ones
    for _ in range(4):
        t, c = time.perf_counter(), time.process_time()
        regions, _report = launch(kernels[kernel], arrays, scalars, grid, block)
        runs.append((time.perf_counter() - t, time.process_time() - c))
        check(results(regions, arrays))
        del regions, _report
    cold = runs[0][0]
    seconds, cpu_seconds = sorted(runs[1:])[1]  # the median warm launch, as Numba's is timed after a warm-up

    held = sum(a.nbytes for a in arrays.values())  # the bytes the launch's buffers hold
    tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    regions, _report = launch(kernels[kernel], arrays, scalars, grid, block)
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    check(results(regions, arrays))
    taken = sum(r.data.nbytes for r in regions.values() if r.data is not None)  # its copies of the buffers
    return {"seconds": seconds, "cpu": cpu_seconds, "cold": cold, "threads": threads_of(kernel, size), "peak": peak,
            "held": held, "copies": taken}


def profile(kernels: dict, kernel: str, size: int, rng, top: int = 10) -> str:
    import cProfile
    import io
    import pstats

    arrays, scalars, _check = inputs(kernel, size, rng)
    prof = cProfile.Profile()
    prof.enable()
    launch(kernels[kernel], arrays, scalars, grid_of(kernel, size), BLOCK[kernel])
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    return out.getvalue()


def peak_sites(kernels: dict, kernel: str, size: int, rng, top: int = 8) -> str:
    """Where the memory live at (about) the launch's peak was allocated: a tracemalloc snapshot each time the
    traced total passes its high-water mark by 1 MiB, checked at every Python call and return."""
    arrays, scalars, _check = inputs(kernel, size, rng)
    best = [0, None]

    def hook(_frame, event, _arg):
        if event in ("call", "return", "c_return"):
            now = tracemalloc.get_traced_memory()[0]
            if now > best[0] + (1 << 20):
                best[0], best[1] = now, tracemalloc.take_snapshot()

    tracemalloc.start(12)
    sys.setprofile(hook)
    try:
        launch(kernels[kernel], arrays, scalars, grid_of(kernel, size), BLOCK[kernel])
    finally:
        sys.setprofile(None)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    by_line: dict = {}  # the innermost line outside NumPy that asked for it
    for st in best[1].statistics("traceback") if best[1] else []:
        frame = next((f for f in reversed(st.traceback) if "numpy" not in f.filename), st.traceback[-1])
        size, count = by_line.get(frame, (0, 0))
        by_line[frame] = (size + st.size, count + st.count)
    lines = [f"traced peak {peak / 2**20:.1f} MiB; live at the snapshot {best[0] / 2**20:.1f} MiB, by the "
             "line outside NumPy that allocated it:"]
    for frame, (size, count) in sorted(by_line.items(), key=lambda kv: -kv[1][0])[:top]:
        lines.append(f"{size / 2**20:9.2f} MiB {count:6d} blocks  {frame.filename}:{frame.lineno}")
    return "\n".join(lines)


# ---- Numba's CUDA simulator (in a subprocess: `--numba KERNEL SIZE`) -----------------------------------------

def numba_worker(kernel: str, size: int) -> dict:
    assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "the worker must start with NUMBA_ENABLE_CUDASIM=1"
    import numba
    from numba import cuda
    from sim_kernels_numba import (
        KERNELS as fns,  # beside this file: the kernels written for Numba
    )

    rng = np.random.default_rng(21)

    def go(n):
        arrays, scalars, check = inputs(kernel, n, rng)
        dev = {k: cuda.to_device(v) for k, v in arrays.items()}
        t = time.perf_counter()
        fns[kernel][grid_of(kernel, n), BLOCK[kernel]](*dev.values(), *scalars)
        cuda.synchronize()
        seconds = time.perf_counter() - t
        check({k: d.copy_to_host() for k, d in dev.items()})
        return seconds

    go(64 if kernel == "transpose" else 512)  # warm: the simulator's first launch sets itself up
    seconds = go(size)
    threads = threads_of(kernel, size)
    return {"seconds": seconds, "threads": threads, "rate": threads / seconds, "numba": numba.__version__}


def numba(kernel: str, size: int) -> dict:
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    done = subprocess.run([sys.executable, __file__, "--numba", kernel, str(size)], env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise SystemExit(f"numba worker ({kernel}, {size}) failed:\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


# ---- the report ----------------------------------------------------------------------------------------------

def cpu() -> str:
    model = "?"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "?")
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    busy = f", load average {load[0]:.2f} (other work on the machine slows both sides)" if load else ""
    return f"{model}, nproc {usable}{busy}"


def rate(x: float) -> str:
    return f"{x:.3g}" if x < 1e4 else f"{x:.2e}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes; judges only the ratios and the memory")
    ap.add_argument("--profile", action="store_true", help="cProfile our launch of every kernel, not only failing ones")
    ap.add_argument("--numba", nargs=2, metavar=("KERNEL", "SIZE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.numba:
        print(json.dumps(numba_worker(a.numba[0], int(a.numba[1]))))
        return 0

    from cudashell.simt import compile_source

    print(f"CPU: {cpu()}; Python {sys.version.split()[0]}, NumPy {np.__version__}")
    t = time.perf_counter()
    kernels = {k.name: k for k in compile_source(SRC)}
    print(f"compile (not timed below): {time.perf_counter() - t:.3f} s")
    rng = np.random.default_rng(21)
    rows, fails = [], []
    for kernel, size, nsize, qsize, qnsize, target in CASES:
        if a.quick:
            size, nsize = qsize, qnsize
        us = ours(kernels, kernel, size, rng)
        them = numba(kernel, nsize)
        r = us["threads"] / us["seconds"]
        rows.append((kernel, size, us, target, r, them, nsize))
    print()
    head = (f"{'kernel':<10} {'size':>8} {'threads':>9} {'ours s':>7} {'(cpu s)':>7} {'(cold)':>7} {'target':>7} "
            f"{'ours thr/s':>10} "
            f"{'numba thr/s':>11} {'(its size)':>10} {'ratio':>8} {'≥':>5} {'memory×':>8} {'≤':>3} "
            f"{'(copies×)':>9}")
    print(head)
    print("-" * len(head))
    verdicts = []
    for kernel, size, us, target, r, them, nsize in rows:
        ratio = r / them["rate"]
        mem = us["peak"] / us["held"]
        print(f"{kernel:<10} {label(kernel, size):>8} {us['threads']:>9} {us['seconds']:7.3f} {us['cpu']:7.3f} "
              f"{us['cold']:7.3f} {target:7.2f} "
              f"{rate(r):>10} {rate(them['rate']):>11} {label(kernel, nsize):>10} {ratio:8.0f} {RATIO:5.0f} "
              f"{mem:8.2f} {MEMORY:3.0f} {us['copies'] / us['held']:9.2f}")
        verdicts.append((f"{kernel} time {us['seconds']:.3f} s ≤ {target:g} s",
                         None if a.quick else us["seconds"] <= target))
        verdicts.append((f"{kernel} ratio {ratio:.0f}× ≥ {RATIO:g}× (numba {them['seconds']:.2f} s "
                         f"for {them['threads']} threads)", ratio >= RATIO))
        verdicts.append((f"{kernel} memory {mem:.2f}× ≤ {MEMORY:g}× ({us['peak'] / 2**20:.1f} MiB over "
                         f"{us['held'] / 2**20:.1f} MiB of buffers)", mem <= MEMORY))
        fails.append((kernel, size, us["seconds"] > target and not a.quick or ratio < RATIO, mem > MEMORY))
    print(f"numba {rows[0][5]['numba']} (NUMBA_ENABLE_CUDASIM=1, in a subprocess); memory× = peak traced bytes "
          "allocated during the launch ÷ bytes its buffers hold, including (copies×) its copies of those buffers; "
          "(cpu s) = the launch's process CPU time, less disturbed by other work than its wall time; ours s is the "
          "median of three launches after a first one, (cold) that first one: the process's first touch of the pages "
          "its buffers' copies take")
    print()
    for what, ok in verdicts:
        print(f"{'n/a (quick)' if ok is None else 'PASS' if ok else 'FAIL':<12} {what}")
    for kernel, size, slow, big in fails:
        if slow or big or a.profile:
            print(f"\nprofile of our {kernel} launch ({label(kernel, size)}), by tottime:")
            print(profile(kernels, kernel, size, rng))
        if big:
            print(f"memory of our {kernel} launch ({label(kernel, size)}): {peak_sites(kernels, kernel, size, rng)}")
    return 0 if all(ok is not False for _, ok in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
