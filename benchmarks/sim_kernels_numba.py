"""sim_kernels.py's kernels written for Numba's CUDA simulator: imported only by its worker, which
starts with NUMBA_ENABLE_CUDASIM=1 (the simulator swaps `cuda` in these functions' globals, so the kernels
live at a module's top level). Numba's simulator has no warp shuffles, so cgreduce's last warp reduces through
shared memory here, where the C kernel's tile uses shfl_down."""

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


@cuda.jit
def reduce8(inp, out, n):
    s = cuda.shared.array(256, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x * 8 + cuda.threadIdx.x
    total = 0
    for j in range(8):
        if i + j * cuda.blockDim.x < n:
            total += inp[i + j * cuda.blockDim.x]
    s[t] = total
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
def matmul(a, b, c, n):
    sa = cuda.shared.array((16, 16), float32)
    sb = cuda.shared.array((16, 16), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    row, col = cuda.blockIdx.y * 16 + ty, cuda.blockIdx.x * 16 + tx
    total = float32(0)
    for m in range(n // 16):
        sa[ty, tx] = a[row * n + m * 16 + tx]
        sb[ty, tx] = b[(m * 16 + ty) * n + col]
        cuda.syncthreads()
        for k in range(16):
            total += sa[ty, k] * sb[k, tx]
        cuda.syncthreads()
    c[row * n + col] = total


@cuda.jit
def casadd(inp, out, n):
    i = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    if i < n:
        old = out[0]
        while True:
            assumed = old
            old = cuda.atomic.compare_and_swap(out, assumed, assumed + inp[i])
            if assumed == old:
                break


@cuda.jit
def cgreduce(inp, out, n):
    s = cuda.shared.array(256, int32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    s[t] = inp[i] if i < n else 0
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride >= 1:
        if t < stride:
            s[t] += s[t + stride]
        cuda.syncthreads()
        stride >>= 1
    if t == 0:
        cuda.atomic.add(out, 0, s[0])


KERNELS = {"vadd": vadd, "reduce": reduce, "reduce8": reduce8, "transpose": transpose, "matmul": matmul,
           "casadd": casadd, "cgreduce": cgreduce}
