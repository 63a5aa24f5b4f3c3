"""sim_kernels.py's three kernels written for Numba's CUDA simulator: imported only by its worker, which
starts with NUMBA_ENABLE_CUDASIM=1 (the simulator swaps `cuda` in these functions' globals, so the kernels
live at a module's top level)."""

from __future__ import annotations

import os

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "import this only with NUMBA_ENABLE_CUDASIM=1"

from numba import cuda, float32, int32  # noqa: E402


@cuda.jit
def vadd(a, b, c, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        c[i] = a[i] + b[i]


@cuda.jit
def reduce(inp, out, n):
    s = cuda.shared.array(256, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    s[t] = inp[i] if i < n else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            s[t] += s[t + stride]
        cuda.syncthreads()
        stride >>= 1
    if t == 0:
        cuda.atomic.add(out, 0, s[0])


@cuda.jit
def transpose(inp, out, w, h):
    tile = cuda.shared.array((32, 33), float32)  # padded, as the C kernel's tile[32][33]
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    x = cuda.blockIdx.x * 32 + tx
    y = cuda.blockIdx.y * 32 + ty
    for j in range(0, 32, 8):
        if x < w and y + j < h:
            tile[ty + j, tx] = inp[(y + j) * w + x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * 32 + tx
    y = cuda.blockIdx.x * 32 + ty
    for j in range(0, 32, 8):
        if x < h and y + j < w:
            out[(y + j) * h + x] = tile[tx, ty + j]


KERNELS = {"vadd": vadd, "reduce": reduce, "transpose": transpose}
