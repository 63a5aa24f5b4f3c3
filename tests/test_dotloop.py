"""Dot-product loops run a window of rounds at a time (simt/dotloop.py) give what the statement-by-statement path
gives: the same bytes (fma.rn's, halfway sums included), counts, racecheck warnings and faults."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from cudashell.simt import compile_source, dotloop, ir
from cudashell.simt.launch import run
from cudashell.simt.memory import Fault, Region

SRC = r'''
#define T 16
__global__ void tiled(const float *a, const float *b, float *c, int n) {
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

__global__ void naive(const float * __restrict__ a, const float *b, float *c, int n) {
  int row = blockIdx.y * blockDim.y + threadIdx.y, col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row < n && col < n) {
    float sum = 1.0f;
    for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
  }
}

__global__ void odd(const float *a, const float *b, float *c, int n) {
  int i = threadIdx.x;
  float sum = a[i];
  int k;
  for (k = 1; k <= n; k += 1) { sum += *(a + k + i) * b[k * 2 + (i & 3)]; }
  c[i] = sum;
  c[i + 32] = k;
}

__global__ void square(const float *a, float *c, int n) {
  float sum = 0.0f;
  for (int k = 0; k < n; ++k) sum += a[k * k] * a[k];
  c[threadIdx.x] = sum;
}

__global__ void over(float *c) {
  __shared__ float s[256];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  float sum = 0.0f;
  for (int k = 0; k < 8; ++k) sum += s[threadIdx.x + k * 32] * s[k];
  c[threadIdx.x] = sum;
}

__global__ void racy(float *c) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  float sum = 0.0f;
  for (int k = 0; k < 32; ++k) sum += s[k] * s[threadIdx.x];
  c[threadIdx.x] = sum;
}
'''


@pytest.fixture(scope="module")
def kernels():
    return {k.name: k for k in compile_source(SRC)}


def launch(kern, arrays: dict, scalars: list, grid, block, fast: bool, monkeypatch, windows=None):
    """(output arrays, report) of one launch, through dotloop (fast: `windows` counts its windows of rounds) or
    statement by statement."""
    with monkeypatch.context() as mp:
        if not fast:
            mp.setattr(dotloop, "run", lambda *a: False)
        elif windows is not None:
            chain = dotloop._chain
            mp.setattr(dotloop, "_chain", lambda *a: windows.append(a[3]) or chain(*a))
        program, fn = kern.handle
        regions, addr = {}, 0x10000000
        for name, arr in arrays.items():
            raw = arr.view(np.uint8)
            regions[name] = Region(name, addr, raw.nbytes, "device", read=lambda raw=raw: raw.copy())
            addr += 0x10000000
        starts, it = iter(r.start for r in regions.values()), iter(scalars)
        values = [next(starts) if q.is_buffer else next(it) for q in kern.params]
        report = run(program, fn, values, grid, block, 0, list(regions.values()))
        out = {n: (r.data[:r.size].view(arrays[n].dtype) if r.data is not None else arrays[n])
               for n, r in regions.items()}
        return out, report


def both(kern, arrays, scalars, grid, block, monkeypatch):
    windows: list = []
    fast = launch(kern, arrays, scalars, grid, block, True, monkeypatch, windows)
    assert windows, "the loop went statement by statement"
    slow = launch(kern, arrays, scalars, grid, block, False, monkeypatch)
    for name in arrays:
        assert fast[0][name].tobytes() == slow[0][name].tobytes(), name
    assert asdict(fast[1].traffic) == asdict(slow[1].traffic)
    assert fast[1].warnings == slow[1].warnings
    return fast


def test_a_tiled_matrix_multiply_gives_the_statement_paths_bits_and_counts(kernels, monkeypatch):
    rng = np.random.default_rng(3)
    n = 64
    a, b = rng.standard_normal(n * n, dtype=np.float32), rng.standard_normal(n * n, dtype=np.float32)
    out, report = both(kernels["tiled"], {"a": a, "b": b, "c": np.zeros(n * n, np.float32)}, [np.int32(n)],
                       (n // 16, n // 16, 1), (16, 16, 1), monkeypatch)
    want = a.reshape(n, n).astype(np.float64) @ b.reshape(n, n).astype(np.float64)
    assert np.allclose(out["c"].reshape(n, n), want, atol=1e-3)
    assert report.traffic.shared_wavefronts > 0 and not report.warnings


def test_global_loads_partial_blocks_and_the_read_only_path_count_as_each_round_would(kernels, monkeypatch):
    rng = np.random.default_rng(4)
    n = 37  # blocks of 16×16 with threads outside the matrix: the loop runs for some lanes only
    a, b = rng.standard_normal(n * n, dtype=np.float32), rng.standard_normal(n * n, dtype=np.float32)
    _, report = both(kernels["naive"], {"a": a, "b": b, "c": np.zeros(n * n, np.float32)}, [np.int32(n)],
                     (3, 3, 1), (16, 16, 1), monkeypatch)
    assert report.traffic.readonly_loads > 0


def test_a_do_it_yourself_counter_inclusive_bound_and_pointer_loads(kernels, monkeypatch):
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal(128, dtype=np.float32), rng.standard_normal(64, dtype=np.float32)
    out, _ = both(kernels["odd"], {"a": a, "b": b, "c": np.zeros(64, np.float32)}, [np.int32(20)], (1, 1, 1),
                  (32, 1, 1), monkeypatch)
    assert out["c"][0] != 0 and list(out["c"][32:]) == [21] * 32  # k as the loop left it


def test_a_sum_halfway_between_two_floats_is_rounded_once_as_fma_rn(kernels, monkeypatch):
    """(1 + 2^-23) + (1 + 2^-23)(2^-24 - 2^-47): the float64 sum lies halfway between two floats (its last bits
    lost), so rounding it again gives 1 + 2^-22; fma.rn rounds the exact sum once, to 1 + 2^-23."""
    one_up = np.float32(1 + 2 ** -23)
    a = np.zeros(128, np.float32)
    b = np.zeros(64, np.float32)
    a[0], a[1:3] = one_up, [one_up, 0]  # lane 0: sum = a[0]; round 1: a[1] * b[2]; round 2: a[2] * b[4] (0)
    b[2] = np.float32(2 ** -24 - 2 ** -47)
    out, _ = both(kernels["odd"], {"a": a, "b": b, "c": np.zeros(64, np.float32)}, [np.int32(2)], (1, 1, 1),
                  (32, 1, 1), monkeypatch)
    twice = (np.float64(one_up) + np.float64(one_up) * np.float64(b[2])).astype(np.float32)
    assert twice == np.float32(1 + 2 ** -22)  # the trap is set
    assert out["c"][0] == one_up


def test_a_loop_that_is_not_affine_in_its_counter_is_left_to_the_statement_path(kernels, monkeypatch):
    loops = [s for s in kernels["square"].handle[1].body.stmts if isinstance(s, ir.Loop)]
    assert dotloop.plan_of(loops[0]) is None
    tiled = kernels["tiled"].handle[1].body.stmts
    outer = next(s for s in tiled if isinstance(s, ir.Loop))
    inner = next(s for s in outer.body.stmts if isinstance(s, ir.Loop))
    assert dotloop.plan_of(inner) is not None and dotloop.plan_of(outer) is None
    windows: list = []
    a = np.arange(64, dtype=np.float32)
    out, _ = launch(kernels["square"], {"a": a, "c": np.zeros(32, np.float32)}, [np.int32(8)], (1, 1, 1),
                    (32, 1, 1), True, monkeypatch, windows)
    assert out["c"][0] == sum(k * k * k for k in range(8)) and not windows


def test_a_round_out_of_bounds_faults_as_the_statement_path_names_it(kernels, monkeypatch):
    messages = []
    for fast in (True, False):
        with pytest.raises(Fault) as err:
            launch(kernels["over"], {"c": np.zeros(256, np.float32)}, [], (2, 1, 1), (256, 1, 1), fast, monkeypatch)
        messages.append((err.value.code, err.value.message))
    assert messages[0] == messages[1]
    assert messages[0][0] == "CUDA_ERROR_ILLEGAL_ADDRESS" and "__shared__ read" in messages[0][1]


def test_a_race_on_the_loops_shared_reads_is_reported_alike(kernels, monkeypatch):
    _, report = both(kernels["racy"], {"c": np.zeros(64, np.float32)}, [], (4, 1, 1), (64, 1, 1), monkeypatch)
    assert report.warnings and "read-after-write" in report.warnings[0]


SHAPES = r'''
__global__ void shapes(const float *a, float *c, int rounds) {
  __shared__ float s[1024];
  int t = threadIdx.y * blockDim.x + threadIdx.x, nt = blockDim.x * blockDim.y;
  for (int i = t; i < 1024; i += nt) s[i] = a[blockIdx.x * 1024 + i];
  __syncthreads();
  float row = 0.5f, col = 0.25f, full = 0.0f, mixed = 1.0f;
  for (int k = 0; k < rounds; ++k) row += s[threadIdx.y * 8 + k] * s[512 + k * 4 + threadIdx.x];
  for (int k = 2; k < rounds; k++) col += s[k * 16 + threadIdx.x] * s[threadIdx.y + 3 * k];
  for (int k = 0; k < rounds; ++k) full += s[t + k] * a[blockIdx.x * 1024 + k * 3 + t];
  for (int k = -4; k < rounds - 4; ++k) mixed += s[(t * 5) % 97 + 2 * k + 8] * s[700 - k];
  c[blockIdx.x * nt + t] = row + col * 2.0f + full * 3.0f + mixed;
}
'''


@pytest.mark.parametrize("block", [(16, 16, 1), (8, 4, 1), (32, 1, 1), (4, 8, 2)])
def test_rows_columns_and_whole_grids_of_a_blocks_threads_gather_alike(block, monkeypatch):
    (kern,) = compile_source(SHAPES)
    threads = block[0] * block[1] * block[2]
    rng = np.random.default_rng(threads)
    a = rng.standard_normal(3 * 1024, dtype=np.float32)
    out, _ = both(kern, {"a": a, "c": np.zeros(3 * threads, np.float32)}, [np.int32(24)], (3, 1, 1), block,
                  monkeypatch)
    assert np.isfinite(out["c"]).all() and out["c"].any()
