"""Users' CUDA C kernels on the simulator (issues 21 and 38): on this machine's CPU, in one run, a vector add over
2^24 ints in ≤ 0.4 s, a 256-thread shared-memory reduction over 2^22 ints in ≤ 2 s, a reduction unrolled 8× over
2^24 ints in ≤ 0.3 s, a 2048×2048 tiled transpose in ≤ 0.3 s, a 16×16 shared-memory tiled matrix multiply of
1024×1024 floats in ≤ 3 s, 2048 threads adding to one int through a textbook atomicCAS loop in ≤ 0.2 s (and
linear in the threads from 256 to 8192: one winner an address a round, every address at once) and a
cooperative-groups reduction, each at ≥ 1,000× the threads per second of Numba's CUDA simulator on the same
kernel written for it (measured in the same run, in a subprocess, on a smaller grid: it runs one OS thread per
CUDA thread; the kernels written for it are in sim_kernels_numba.py), and a launch's own working memory within
twice the bytes its buffers hold (tracemalloc, which sees NumPy's buffers, around a second launch; judged where
the buffers hold at least 1 MiB: below that the interpreter's fixed per-lane arrays are the whole of it).

Ours runs through the interpreter directly (`cudashell.simt.launch.run`); a launch's time includes taking in
its buffers' bytes, as the shell's launch does, but not compiling the source. `--quick` runs smaller sizes
and judges only the ratios and the memory. Numba is a benchmark-only dependency (`pip install .[bench]`):
without it the ratios are not judged. `--only KERNEL,…` runs some of the kernels."""

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

__global__ void reduce8(const int *in, int *out, int n) {
  __shared__ int s[256];
  unsigned t = threadIdx.x;
  unsigned i = blockIdx.x * blockDim.x * 8 + threadIdx.x;
  int sum = 0;
  for (int j = 0; j < 8; ++j)
    if (i + j * blockDim.x < n) sum += in[i + j * blockDim.x];
  s[t] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) atomicAdd(out, s[0]);
}

#define T 16
__global__ void matmul(const float *a, const float *b, float *c, int n) {
  __shared__ float as[T][T];
  __shared__ float bs[T][T];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
  float sum = 0.0f;
  for (int m = 0; m < n / T; ++m) {
    as[ty][tx] = a[row * n + m * T + tx];
    bs[ty][tx] = b[(m * T + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < T; ++k)
      sum += as[ty][k] * bs[k][tx];
    __syncthreads();
  }
  c[row * n + col] = sum;
}

__device__ int cas_add(int *address, int value) {
  int old = *address, assumed;
  do {
    assumed = old;
    old = atomicCAS(address, assumed, assumed + value);
  } while (assumed != old);
  return old;
}

__global__ void casadd(const int *in, int *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) cas_add(out, in[i]);
}

#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void cgreduce(const int *in, int *out, int n) {
  __shared__ int s[256];
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
  unsigned t = block.thread_rank();
  unsigned i = blockIdx.x * block.size() + t;
  s[t] = i < n ? in[i] : 0;
  block.sync();
  for (unsigned stride = block.size() / 2; stride >= 32; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    block.sync();
  }
  if (tile.meta_group_rank() == 0) {
    int v = s[t];
    for (int offset = 16; offset > 0; offset /= 2)
      v += tile.shfl_down(v, offset);
    if (tile.thread_rank() == 0) atomicAdd(out, v);
  }
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

# (kernel, our size, numba's size, our size with --quick, numba's with --quick, seconds target or None)
# sizes: elements for vadd/reduce/reduce8/cgreduce, the side of the square matrix for transpose and matmul,
# threads for casadd
CASES = [("vadd", 1 << 24, 1 << 13, 1 << 20, 1 << 11, 0.4),
         ("reduce", 1 << 22, 1 << 12, 1 << 18, 1 << 10, 2.0),
         ("reduce8", 1 << 24, 1 << 15, 1 << 20, 1 << 13, 0.3),
         ("transpose", 2048, 128, 256, 64, 0.3),
         ("matmul", 1024, 64, 256, 32, 3.0),
         ("casadd", 2048, 256, 512, 128, 0.2),
         ("cgreduce", 1 << 22, 1 << 12, 1 << 18, 1 << 10, None)]
CAS_SCALE = (256, 512, 1024, 2048, 4096, 8192)  # threads of the linearity run (--quick: up to 2048)
RATIO, MEMORY, MEMORY_FLOOR = 1000.0, 2.0, 1 << 20
LINEAR = 2.0  # casadd's seconds per thread at the largest size ≤ this × at the smallest (quadratic: × 32)
BLOCK = {"vadd": (256, 1, 1), "reduce": (256, 1, 1), "reduce8": (256, 1, 1), "transpose": (32, 8, 1),
         "matmul": (16, 16, 1), "casadd": (256, 1, 1), "cgreduce": (256, 1, 1)}
SQUARE = ("transpose", "matmul")
WARM = {"transpose": 64, "matmul": 32}  # Numba's warm-up launch's size


def grid_of(kernel: str, size: int) -> tuple:
    if kernel == "transpose":
        return (size // 32, size // 32, 1)
    if kernel == "matmul":
        return (size // 16, size // 16, 1)
    if kernel == "reduce8":
        return (-(-size // (256 * 8)), 1, 1)
    return (-(-size // 256), 1, 1)


def threads_of(kernel: str, size: int) -> int:
    g, b = grid_of(kernel, size), BLOCK[kernel]
    return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


def label(kernel: str, size: int) -> str:
    if kernel == "casadd":
        return str(size)
    if kernel in SQUARE:
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
    if kernel in ("reduce", "reduce8", "cgreduce", "casadd"):
        x = rng.integers(-100, 101, size, dtype=np.int64).astype(np.int32)
        want = int(x.astype(np.int64).sum())

        def check(out):
            assert int(out["out"][0]) == want, f"{kernel}: {int(out['out'][0])}, not {want}"
        return {"in": x, "out": np.zeros(1, np.int32)}, [np.int32(size)], check
    if kernel == "matmul":
        a = rng.random((size, size), dtype=np.float32)
        b = rng.random((size, size), dtype=np.float32)
        want = a.astype(np.float64) @ b.astype(np.float64)

        def check(out):
            got = out["c"].reshape(size, size)
            assert np.allclose(got, want, rtol=1e-5, atol=1e-5 * size), "matmul: wrong product"
        return ({"a": a.ravel(), "b": b.ravel(), "c": np.zeros(size * size, np.float32)}, [np.int32(size)],
                check)
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

    go(WARM.get(kernel, 512))  # warm: the simulator's first launch sets itself up
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


def cas_scaling(kernels: dict, sizes, rng) -> list[tuple[int, float, float]]:
    """casadd's median warm (wall, CPU) seconds at each thread count: one address, so as many rounds as threads."""
    out = []
    for n in sizes:
        arrays, scalars, check = inputs("casadd", n, rng)
        runs = []
        for _ in range(3):
            t, c = time.perf_counter(), time.process_time()
            regions, _report = launch(kernels["casadd"], arrays, scalars, grid_of("casadd", n), BLOCK["casadd"])
            runs.append((time.perf_counter() - t, time.process_time() - c))
            check(results(regions, arrays))
        out.append((n, *sorted(runs)[1]))
    return out


def numba_available() -> bool:
    import importlib.util
    return importlib.util.find_spec("numba") is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller sizes; judges only the ratios and the memory")
    ap.add_argument("--profile", action="store_true", help="cProfile our launch of every kernel, not only failing ones")
    ap.add_argument("--only", help="a comma-separated list of the kernels to run (default: all)")
    ap.add_argument("--no-numba", action="store_true", help="skip Numba's simulator (the ratios are not judged)")
    ap.add_argument("--numba", nargs=2, metavar=("KERNEL", "SIZE"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.numba:
        print(json.dumps(numba_worker(a.numba[0], int(a.numba[1]))))
        return 0

    from cudashell.simt import compile_source

    with_numba = numba_available() and not a.no_numba
    only = set(a.only.split(",")) if a.only else None
    print(f"CPU: {cpu()}; Python {sys.version.split()[0]}, NumPy {np.__version__}")
    t = time.perf_counter()
    kernels = {k.name: k for k in compile_source(SRC)}
    print(f"compile (not timed below): {time.perf_counter() - t:.3f} s")
    rng = np.random.default_rng(21)
    rows, fails = [], []
    for kernel, size, nsize, qsize, qnsize, target in CASES:
        if only is not None and kernel not in only:
            continue
        if a.quick:
            size, nsize = qsize, qnsize
        us = ours(kernels, kernel, size, rng)
        them = numba(kernel, nsize) if with_numba else None
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
        ratio = r / them["rate"] if them else None
        mem = us["peak"] / us["held"]
        judged = us["held"] >= MEMORY_FLOOR
        print(f"{kernel:<10} {label(kernel, size):>8} {us['threads']:>9} {us['seconds']:7.3f} {us['cpu']:7.3f} "
              f"{us['cold']:7.3f} {target if target else float('nan'):7.2f} "
              f"{rate(r):>10} {rate(them['rate']) if them else '-':>11} {label(kernel, nsize):>10} "
              f"{ratio if ratio else float('nan'):8.0f} {RATIO:5.0f} "
              f"{mem:8.2f} {MEMORY:3.0f} {us['copies'] / us['held']:9.2f}")
        if target is not None:
            verdicts.append((f"{kernel} time {us['seconds']:.3f} s ≤ {target:g} s",
                             None if a.quick else us["seconds"] <= target))
        if them:
            verdicts.append((f"{kernel} ratio {ratio:.0f}× ≥ {RATIO:g}× (numba {them['seconds']:.2f} s "
                             f"for {them['threads']} threads)", ratio >= RATIO))
        verdicts.append((f"{kernel} memory {mem:.2f}× ≤ {MEMORY:g}× ({us['peak'] / 2**20:.1f} MiB over "
                         f"{us['held'] / 2**20:.1f} MiB of buffers)", mem <= MEMORY if judged else None))
        slow = (target is not None and us["seconds"] > target and not a.quick) or (ratio is not None and ratio < RATIO)
        fails.append((kernel, size, slow, judged and mem > MEMORY))
    numba_note = (f"numba {rows[0][5]['numba']} (NUMBA_ENABLE_CUDASIM=1, in a subprocess)" if with_numba and rows
                  else "numba not run (not installed, or --no-numba): ratios not judged")
    print(f"{numba_note}; memory× = peak traced bytes "
          "allocated during the launch ÷ bytes its buffers hold, including (copies×) its copies of those buffers "
          f"(judged where they hold ≥ {MEMORY_FLOOR >> 20} MiB); "
          "(cpu s) = the launch's process CPU time, less disturbed by other work than its wall time; ours s is the "
          "median of three launches after a first one, (cold) that first one: the process's first touch of the pages "
          "its buffers' copies take")
    if only is None or "casadd" in only:
        scale = cas_scaling(kernels, [n for n in CAS_SCALE if not a.quick or n <= 2048], rng)
        print("\ncasadd (one address, a textbook atomicCAS loop) by threads, wall (CPU) seconds: "
              + ", ".join(f"{n}: {s:.3f} ({c:.3f}) s, {c / n * 1e6:.0f} µs of CPU a thread" for n, s, c in scale))
        (n0, _, c0), (n1, _, c1) = scale[0], scale[-1]
        growth = (c1 / n1) / (c0 / n0)  # judged on CPU time: other work on the machine disturbs it less
        verdicts.append((f"casadd linear: CPU seconds a thread at {n1} = {growth:.2f}× that at {n0} ≤ {LINEAR:g}× "
                         f"(quadratic: {n1 // n0}×)", growth <= LINEAR))
    print()
    for what, ok in verdicts:
        print(f"{'n/a' if ok is None else 'PASS' if ok else 'FAIL':<12} {what}")
    for kernel, size, slow, big in fails:
        if slow or big or a.profile:
            print(f"\nprofile of our {kernel} launch ({label(kernel, size)}), by tottime:")
            print(profile(kernels, kernel, size, rng))
        if big:
            print(f"memory of our {kernel} launch ({label(kernel, size)}): {peak_sites(kernels, kernel, size, rng)}")
    return 0 if all(ok is not False for _, ok in verdicts) else 1


if __name__ == "__main__":
    raise SystemExit(main())
