"""Code nobody here wrote, read where it lives: kernel files of NVIDIA's cuda-samples
(https://github.com/NVIDIA/cuda-samples, BSD-3-Clause), taken unchanged at pinned commits from a local git mirror
(`CUDASHELL_CUDA_SAMPLES`: the path of its git directory, bare or not) when the tests run, never copied into this
repository. Each entry says which files of which folder at which commit, and the case (tests/kernel_corpus.py's
`Case`) they run as; tests/test_public_kernels.py writes them into a temporary folder beside a generated wrapper
`.cu` that #includes the kernel file, and runs them through the corpus's runner.

| sample (folder in NVIDIA/cuda-samples) | files | commit | cases | needs |
| --- | --- | --- | --- | --- |
| `Samples/0_Introduction/vectorAdd_nvrtc` | `vectorAdd_kernel.cu` | `c94ff366` | `vectorAdd` | |
| `Samples/0_Introduction/simpleAtomicIntrinsics_nvrtc` | `simpleAtomicIntrinsics_kernel.cuh` | `c94ff366` | `simpleAtomicIntrinsics` | |
| `Samples/0_Introduction/simpleAssert_nvrtc` | `simpleAssert_kernel.cu` | `c94ff366` | `simpleAssert` (CUDA_ERROR_ASSERT) | |
| `Samples/0_Introduction/simpleVoteIntrinsics_nvrtc` | `simpleVote_kernel.cuh` | `56ad17f9` (the last before the `_nvrtc` sample was removed in `a14d7346`) | `simpleVote_any`, `_all`, `_warps` | |
| `Samples/0_Introduction/matrixMul_nvrtc` | `matrixMul_kernel.cu` | `c94ff366` | `matrixMul_block16`, `_block32` | cooperative groups |
| `Samples/2_Concepts_and_Techniques/inlinePTX_nvrtc` | `inlinePTX_kernel.cu` | `c94ff366` | `inlinePTX_refused`: inline PTX (`asm`) | |
| `Samples/0_Introduction/simpleTemplates_nvrtc` | `simpleTemplates_kernel.cu`, `sharedmem.cuh` | `769a225a` (the last before the sample was removed in `a461e614`) | `simpleTemplates_float`, `_int` | `SharedMemory<T>`: struct templates with methods and operators |
| `Samples/5_Domain_Specific/binomialOptions_nvrtc` | `binomialOptions_kernel.cu`, `binomialOptions_common.h`, `common_gpu_header.h`, `realtype.h` | `c94ff366` | `binomialOptions` | `static __constant__` struct array and a `__device__` array filled and read by the host |
| `Samples/5_Domain_Specific/quasirandomGenerator_nvrtc` | `quasirandomGenerator_kernel.cu`, `quasirandomGenerator_common.h` | `c94ff366` | `quasirandomGenerator`, `inverseCND` | a `__constant__` table filled by the host |
| `Samples/2_Concepts_and_Techniques/scalarProd` | `scalarProd_kernel.cuh` | `c94ff366` | `scalarProd` | cooperative groups |
| `Samples/2_Concepts_and_Techniques/shfl_scan` | `shfl_scan.cu`, lines 55-148 (its two kernels) | `c94ff366` | `shfl_scan_test`, `uniform_add` | |
| `Samples/2_Concepts_and_Techniques/shfl_scan` | `shfl_integral_image.cuh`, lines 268-319 (`shfl_vertical_shfl`) | `c94ff366` | `shfl_vertical_shfl` | |
| `Samples/6_Performance/transpose` | `transpose.cu`, lines 41-43, 56-57, 120-242 (the kernels, not the host code) | `c94ff366` | `transpose_naive`, `_coalesced`, `_no_bank_conflicts`, `_diagonal`, `_diagonal_wide` | cooperative groups |

Commits in full: `c94ff366aed18c797b8a85dfaac7817b0228b420`, `56ad17f97c71acf7aa12f013c82ab5dcf9a733b5`,
`769a225af335ae7c463ee9868cc137c0e827c990`.

Left out, for reasons outside issue 34's subset:

- `clock_nvrtc/clock_kernel.cu`: `clock()`, whose readings are the point of the sample and differ on every run.
- `BlackScholes_nvrtc/BlackScholes_kernel.cuh`: C++ references, `__fdividef` on the fast path, `__expf`/`__logf`
  everywhere (the GPU's approximations: bytes that cannot be identical).
- `shfl_integral_image.cuh`'s `shfl_intimage_rows`: a lambda with captures, `memcpy` in device code, C++ references
  and `uchar4`/`uint4` shuffled through a tile (its `shfl_vertical_shfl` is in the table).
- `fastWalshTransform_kernel.cuh`, `reduction_kernel.cu`: host functions that launch kernels (`<<<…>>>`) live in the
  same file, and the simulator refuses a file with a launch in it as dynamic parallelism.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tests.kernel_corpus import (
    UINT_MAX,
    B,
    Case,
    Fill,
    O,
    atomic_dec,
    atomic_inc,
    const,
    f32,
    fma32,
    rand,
    reduce_bits,
    tree_sum,
    wrap,
)

MIRROR_VARIABLE = "CUDASHELL_CUDA_SAMPLES"
REPOSITORY = "NVIDIA/cuda-samples"
MAIN_2025 = "c94ff366aed18c797b8a85dfaac7817b0228b420"
VOTE_NVRTC = "56ad17f97c71acf7aa12f013c82ab5dcf9a733b5"
TEMPLATES_NVRTC = "769a225af335ae7c463ee9868cc137c0e827c990"


@dataclass(frozen=True)
class Taken:
    """Files of one sample folder at one commit, written side by side: `kernel` is the one the generated wrapper
    #includes, `beside` what it #includes from beside it. `lines` keeps only those line ranges of `kernel`
    (1-based, inclusive), each as it is: the kernels of a file whose host code is no kernel's business."""

    folder: str
    kernel: str
    commit: str = MAIN_2025
    beside: tuple[str, ...] = ()
    lines: tuple[tuple[int, int], ...] = ()

    def path(self, name: str) -> str:
        return f"{self.folder}/{name}"


@dataclass(frozen=True)
class Public:
    """A case of code read from the mirror: its `case.file` is the wrapper, made where the test runs."""

    taken: Taken
    case: Case


# ------------------------------------------------------------------ references
def ref_sample_atomics(d, n=8 * 256):
    tid = np.arange(n)
    g = d["g_odata"].astype(np.int64).copy()
    g[0], g[1] = 10 * n, -10 * n
    g[3], g[4] = max(0, n - 1), 0
    g[5], g[6] = atomic_inc(n, 17), atomic_dec(n, 137)
    g[8] = reduce_bits(lambda a, v: a & v, 2 * tid + 7, 0xFF)
    g[9] = reduce_bits(lambda a, v: a | (1 << v if v < 32 else 0), tid, 0)  # PTX shl: a shift of 32 or more gives 0
    g[10] = reduce_bits(lambda a, v: a ^ v, tid, 0xFF)
    return {"g_odata": wrap(g, "int32")}


def check_sample_atomics(out, n=8 * 256):
    for k, what in ((2, "atomicExch"), (7, "atomicCAS")):
        assert 0 <= out["g_odata"][k] < n, f"{what} left {out['g_odata'][k]}, not one of the thread ids"


def vote_input() -> tuple[Fill, ...]:
    """simpleVoteIntrinsics' pattern, made of fills: a warp of zeros, a warp whose odd lanes are non-zero, a warp
    whose even lanes are, a warp of all ones (uint64 1<<32 is the uint32 pair 0, 1)."""
    return (const(0, 32), const(1 << 32, 16, "uint64"), const(1, 16, "uint64"), const(UINT_MAX, 32))


def ref_vote(kind):
    def ref(d):
        w = (d["vin"].reshape(4, 32) != 0)
        vote = w.any(axis=1) if kind == "any" else w.all(axis=1)
        return {"vres": np.repeat(vote, 32).astype(np.uint32)}
    return ref


def ref_vote3(d):
    tx = np.arange(96)
    high = tx >= 48
    warp_any = np.repeat(high.reshape(3, 32).any(axis=1), 32)
    warp_all = np.repeat(high.reshape(3, 32).all(axis=1), 32)
    return {"vinfo": np.stack([warp_any, high, warp_all], axis=1).astype(np.uint8)}


def ref_matrix_mul(h, w, k):
    """C = A·B with `Csub += As[ty][k] * Bs[k][tx]` contracted into one fma a step, k in order."""
    def ref(d):
        a, b = d["ma"].reshape(h, k), d["mb"].reshape(k, w)
        acc = np.zeros((h, w), np.float32)
        for j in range(k):
            acc = fma32(a[:, j, None], b[None, j, :], acc)
        return {"mc": acc}
    return ref


def ref_scalar_prod(d, vectors=4, elements=4096, accum=1024):
    """Each of ACCUM_N accumulators sums its strided products (fma), then the shared tree halves them."""
    a, b = d["spa"].reshape(vectors, elements), d["spb"].reshape(vectors, elements)
    acc = np.zeros((vectors, accum), np.float32)
    for k in range(elements // accum):
        acc = fma32(a[:, k * accum:(k + 1) * accum], b[:, k * accum:(k + 1) * accum], acc)
    return {"spc": tree_sum(acc)}


# binomialOptions: four options (spot S, strike X, years T, rate R, volatility V), turned into the kernel's
# __TOptionData {S, X, vDt, puByDf, pdByDf} as the sample's host code does (here in double, stored as float)
OPTIONS = ((30.0, 25.0, 1.0, 0.06, 0.10), (20.0, 22.0, 2.0, 0.05, 0.25), (10.0, 10.0, 0.5, 0.03, 0.30))
STEPS = 2048  # NUM_STEPS in binomialOptions_common.h
MAX_OPTIONS = 1024


def option_data(s, x, t, r, v) -> tuple[float, ...]:
    dt = t / STEPS
    vdt, rdt = v * math.sqrt(dt), r * dt
    up, down, discount = math.exp(vdt), math.exp(-vdt), math.exp(-rdt)
    pu = (math.exp(rdt) - down) / (up - down)
    return tuple(float(f32(v)) for v in (s, x, vdt, pu * discount, (1.0 - pu) * discount))


def binomial_input() -> tuple[Fill, ...]:
    return tuple(const(v, 1) for o in OPTIONS for v in option_data(*o)) + (const(0.0),)


def ref_binomial(d):
    """The lattice as the kernel walks it: leaves `S * __expf(vDt * (2i - N)) - X` (one fma; __expf rounded from
    the exact value, as the simulator computes it), then N steps of `puByDf * up + pdByDf * here` (the first
    product fused), a step per iteration for every node (the kernel's threads that stop early hold nodes no later
    step reads)."""
    out = np.zeros(MAX_OPTIONS, np.float32)
    fields = d["d_OptionData"].reshape(MAX_OPTIONS, 5)
    i = np.arange(STEPS + 1).astype(np.float32)
    for o in range(len(OPTIONS)):
        s, x, vdt, pu, pd = fields[o]
        e = np.exp((vdt * (f32(2.0) * i - f32(STEPS))).astype(np.float64)).astype(np.float32)
        call = fma32(s, e, -x)
        call = np.where(call > 0, call, f32(0)).astype(np.float32)
        for _ in range(STEPS):
            call[:-1] = fma32(pu, call[1:], pd * call[:-1])
        out[o] = call[0]
    return {"d_CallValue": out}


QRNG_DIMENSIONS, QRNG_RESOLUTION = 3, 31


def ref_quasirandom(d, seed=5, n=1000):
    """Niederreiter: each set bit of seed + pos picks a table entry of its dimension to xor in; then
    (float)(result + 1) * INT_SCALE, INT_SCALE being 1.0f / (float)0x80000001U = 2^-31."""
    table = d["c_Table"].reshape(QRNG_DIMENSIONS, QRNG_RESOLUTION)
    data = (seed + np.arange(n)).astype(np.uint32)
    out = np.zeros((QRNG_DIMENSIONS, n), np.uint32)
    for bit in range(QRNG_RESOLUTION):
        on = ((data >> np.uint32(bit)) & np.uint32(1)).astype(bool)
        out ^= np.where(on[None, :], table[:, bit:bit + 1], np.uint32(0))
    return {"qout": ((out + np.uint32(1)).astype(np.float32) * f32(2.0**-31)).ravel()}


MORO_A = tuple(f32(v) for v in (2.50662823884, -18.61500062529, 41.39119773534, -25.44106049637))
MORO_B = tuple(f32(v) for v in (-8.4735109309, 23.08336743743, -21.06224101826, 3.13082909833))
MORO_C = tuple(f32(v) for v in (0.337475482272615, 0.976169019091719, 0.160797971491821, 2.76438810333863e-02,
                                3.8405729373609e-03, 3.951896511919e-04, 3.21767881768e-05, 2.888167364e-07,
                                3.960315187e-07))


def logf(x):
    """__logf as the simulator computes it: the exact logarithm rounded once (the GPU's differs in the last bits)."""
    return np.log(np.asarray(x, np.float32).astype(np.float64)).astype(np.float32)


def ref_inverse_cnd(d, n=2000):
    """Moro's inverse normal, operation by operation: Horner's `a * z + b` fused, `p2 * num / den` rounded twice."""
    distance = np.uint32(UINT_MAX // (n + 1))
    x = (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(distance)).astype(np.uint32)
    negate = x >= np.uint32(0x80000000)
    x = np.where(negate, np.uint32(UINT_MAX) - x, x)
    x1 = f32(2.0**-32)  # 1.0f / static_cast<float>(0xffffffffUL): the float is 2^32
    p1 = fma32(x.astype(np.float32), x1, x1 / f32(2))
    p2 = p1 - f32(0.5)
    z = p2 * p2
    a1, a2, a3, a4 = MORO_A
    b1, b2, b3, b4 = MORO_B
    num = fma32(fma32(fma32(a4, z, a3), z, a2), z, a1)
    den = fma32(fma32(fma32(fma32(b4, z, b3), z, b2), z, b1), z, f32(1))
    body = (p2 * num) / den
    with np.errstate(invalid="ignore", divide="ignore"):
        t = logf(-logf(p1))
    tail = MORO_C[8]
    for c in reversed(MORO_C[:8]):
        tail = fma32(t, tail, c)
    z = np.where(p2 > f32(-0.42), body, -tail).astype(np.float32)
    return {"cnd": np.where(negate, -z, z)}


def ref_block_scan(d, blocks=4, block=256):
    """shfl_scan_test: an inclusive scan within each block (warp scans, then the warps' sums), the block's total
    into partial_sums."""
    x = d["sdata"].astype(np.int64).reshape(blocks, block)
    scan = np.cumsum(x, axis=1)
    return {"sdata": wrap(scan, "int32"), "spart": wrap(scan[:, -1], "int32")}


def ref_column_sums(d, w=64, h=1080):
    """shfl_vertical_shfl: each column's running sum, down all 135 * 8 rows."""
    return {"img": (np.cumsum(d["img"].astype(np.uint64).reshape(h, w), axis=0) & np.uint64(UINT_MAX))
            .astype(np.uint32)}


def ref_transpose(w, h):
    return lambda d: {"tout": d["tin"].reshape(h, w).T.copy()}


# ------------------------------------------------------------------ the table
def sample(name, summary, kernel, args, grid, block, taken, **kw) -> Public:
    return Public(taken, Case(name, summary, kernel, args, grid, block, **kw))


VECTOR_ADD = Taken("Samples/0_Introduction/vectorAdd_nvrtc", "vectorAdd_kernel.cu")
ATOMICS = Taken("Samples/0_Introduction/simpleAtomicIntrinsics_nvrtc", "simpleAtomicIntrinsics_kernel.cuh")
ASSERT = Taken("Samples/0_Introduction/simpleAssert_nvrtc", "simpleAssert_kernel.cu")
VOTE = Taken("Samples/0_Introduction/simpleVoteIntrinsics_nvrtc", "simpleVote_kernel.cuh", VOTE_NVRTC)
MATRIX_MUL = Taken("Samples/0_Introduction/matrixMul_nvrtc", "matrixMul_kernel.cu")
INLINE_PTX = Taken("Samples/2_Concepts_and_Techniques/inlinePTX_nvrtc", "inlinePTX_kernel.cu")
TEMPLATES = Taken("Samples/0_Introduction/simpleTemplates_nvrtc", "simpleTemplates_kernel.cu", TEMPLATES_NVRTC,
                  ("sharedmem.cuh",))
BINOMIAL = Taken("Samples/5_Domain_Specific/binomialOptions_nvrtc", "binomialOptions_kernel.cu",
                 beside=("binomialOptions_common.h", "common_gpu_header.h", "realtype.h"))
QUASIRANDOM = Taken("Samples/5_Domain_Specific/quasirandomGenerator_nvrtc", "quasirandomGenerator_kernel.cu",
                    beside=("quasirandomGenerator_common.h",))
SCALAR_PROD = Taken("Samples/2_Concepts_and_Techniques/scalarProd", "scalarProd_kernel.cuh")
SHFL_SCAN = Taken("Samples/2_Concepts_and_Techniques/shfl_scan", "shfl_scan.cu", lines=((55, 148),))
SHFL_IMAGE = Taken("Samples/2_Concepts_and_Techniques/shfl_scan", "shfl_integral_image.cuh", lines=((268, 319),))
TRANSPOSE = Taken("Samples/6_Performance/transpose", "transpose.cu", lines=((41, 43), (56, 57), (120, 242)))

PUBLIC: list[Public] = [
    sample("vectorAdd", "vectorAdd_nvrtc", "vectorAdd", "va vb vc 10000", 40, 256, VECTOR_ADD,
           buffers=(B("va", "device", "float32", 10000, rand(59)), B("vb", "device", "float32", 10000, rand(60)),
                    O("vc", "device", "float32", 10000)),
           reference=lambda d: {"vc": d["va"] + d["vb"]}),
    sample("simpleAtomicIntrinsics", "simpleAtomicIntrinsics_nvrtc: every atomic on one int array", "testKernel",
           "g_odata", 8, 256, ATOMICS,
           buffers=(O("g_odata", "device", "int32", 11, (const(0, 8), const(0xFF, 1), const(0, 1), const(0xFF, 1))),),
           reference=ref_sample_atomics, unordered={"g_odata": (2, 7)}, check=check_sample_atomics),
    sample("simpleVote_any", "simpleVoteIntrinsics_nvrtc VoteAnyKernel1", "VoteAnyKernel1", "vin vres 128", 1, 128,
           VOTE, buffers=(B("vin", "device", "uint32", 128, vote_input()), O("vres", "device", "uint32", 128)),
           reference=ref_vote("any")),
    sample("simpleVote_all", "simpleVoteIntrinsics_nvrtc VoteAllKernel2", "VoteAllKernel2", "vin vres 128", 1, 128,
           VOTE, buffers=(B("vin", "device", "uint32", 128, vote_input()), O("vres", "device", "uint32", 128)),
           reference=ref_vote("all")),
    sample("simpleVote_warps", "simpleVoteIntrinsics_nvrtc VoteAnyKernel3 (bool output)", "VoteAnyKernel3",
           "vinfo 32", 1, 96, VOTE, buffers=(O("vinfo", "device", "uint8", 3 * 96),), reference=ref_vote3),
    sample("simpleAssert", "simpleAssert_nvrtc: threads 60..63 fail the assert", "testKernel", "60", 2, 32, ASSERT,
           error="CUDA_ERROR_ASSERT"),
    sample("matrixMul_block16", "matrixMul_nvrtc: 48x32 · 32x64 in 16x16 tiles, cooperative_groups::sync",
           "matrixMulCUDA_block16", "mc ma mb 32 64", (4, 3), (16, 16), MATRIX_MUL,
           buffers=(B("ma", "device", "float32", 48 * 32, rand(61)), B("mb", "device", "float32", 32 * 64, rand(62)),
                    O("mc", "device", "float32", 48 * 64)),
           reference=ref_matrix_mul(48, 64, 32)),
    sample("matrixMul_block32", "matrixMul_nvrtc: 64x96 · 96x32 in 32x32 tiles (1024 threads a block)",
           "matrixMulCUDA_block32", "mc ma mb 96 32", (1, 2), (32, 32), MATRIX_MUL,
           buffers=(B("ma", "device", "float32", 64 * 96, rand(63)), B("mb", "device", "float32", 96 * 32, rand(64)),
                    O("mc", "device", "float32", 64 * 32)),
           reference=ref_matrix_mul(64, 32, 96)),
    sample("inlinePTX_refused", 'inlinePTX_nvrtc: asm("mov.u32 %0, %%laneid;")', "", "", 1, 1, INLINE_PTX,
           refused=("asm", "ptx")),
    sample("simpleTemplates_float", "simpleTemplates_nvrtc testFloat: SharedMemory<float> over dynamic shared memory",
           "testFloat", "tin tout", 1, 64, TEMPLATES, shared=64 * 4,
           buffers=(B("tin", "device", "float32", 64, rand(65)), O("tout", "device", "float32", 64)),
           reference=lambda d: {"tout": f32(64) * d["tin"]}),
    sample("simpleTemplates_int", "simpleTemplates_nvrtc testInt: the SharedMemory<int> specialisation", "testInt",
           "tin tout", 1, 128, TEMPLATES, shared=128 * 4,
           buffers=(B("tin", "device", "int32", 128, rand(66)), O("tout", "device", "int32", 128)),
           reference=lambda d: {"tout": wrap(d["tin"].astype(np.int64) * 128, "int32")}),
    sample("binomialOptions", "binomialOptions_nvrtc: options in a static __constant__ struct array, prices into a "
           "__device__ array (cuModuleGetGlobal on both sides)", "binomialOptionsKernel", "", len(OPTIONS), 128,
           BINOMIAL, module="binomial",
           buffers=(B("d_OptionData", "symbol", "float32", MAX_OPTIONS * 5, binomial_input()),
                    O("d_CallValue", "as-loaded", "float32", MAX_OPTIONS)),
           reference=ref_binomial, ulps={"d_CallValue": 64}),  # __expf: the GPU's approximation, 2049 leaves a price
    sample("quasirandomGenerator", "quasirandomGenerator_nvrtc: a __constant__ table of direction numbers filled by "
           "the host, __umul24, 2-D blocks (one row a dimension)", "quasirandomGeneratorKernel", "qout 5u 1000u",
           2, (64, QRNG_DIMENSIONS), QUASIRANDOM, module="qrng",
           buffers=(B("c_Table", "symbol", "uint32", QRNG_DIMENSIONS * QRNG_RESOLUTION, rand(67)),
                    O("qout", "device", "float32", QRNG_DIMENSIONS * 1000)),
           reference=ref_quasirandom),
    sample("inverseCND", "quasirandomGenerator_nvrtc inverseCNDKernel: Moro's inverse normal (its tail through "
           "__logf)", "inverseCNDKernel", "cnd 2000u", 2, 128, QUASIRANDOM, module="qrng",
           buffers=(O("cnd", "device", "float32", 2000),),
           reference=ref_inverse_cnd, ulps={"cnd": 16}),  # __logf: the GPU's approximation in the tail
    sample("scalarProd", "scalarProd: strided fma accumulators, a shared tree with cg::sync, __mul24",
           "scalarProdGPU", "spc spa spb 4 4096", 4, 256, SCALAR_PROD,
           buffers=(B("spa", "device", "float32", 4 * 4096, rand(68)), B("spb", "device", "float32", 4 * 4096, rand(69)),
                    O("spc", "device", "float32", 4)),
           reference=ref_scalar_prod),
    sample("shfl_scan_test", "shfl_scan: a block scan from __shfl_up_sync warp scans, a partial-width scan of the "
           "warps' sums, the total into partial_sums (a defaulted parameter)", "shfl_scan_test", "sdata 32 spart",
           4, 256, SHFL_SCAN, shared=8 * 4,
           buffers=(O("sdata", "device", "int32", 1024, rand(92)), O("spart", "device", "int32", 4)),
           reference=ref_block_scan),
    sample("uniform_add", "shfl_scan: uniform_add, a block's partial sum staged in a __shared__ int",
           "uniform_add", "udata upart 1024", 4, 256, SHFL_SCAN,
           buffers=(O("udata", "device", "int32", 1024, rand(93)), B("upart", "device", "int32", 4, rand(94))),
           reference=lambda d: {"udata": wrap(d["udata"].astype(np.int64)
                                              + np.repeat(d["upart"].astype(np.int64), 256), "int32")}),
    sample("shfl_vertical_shfl", "shfl_scan's integral image, vertical pass: column sums down 1080 rows through "
           "a [32][9] shared tile and 8-lane __shfl_up_sync scans", "shfl_vertical_shfl", "img 64 1080", (2, 1),
           (32, 8), SHFL_IMAGE,
           buffers=(O("img", "device", "uint32", 64 * 1080, rand(95)),),
           reference=ref_column_sums),
    sample("transpose_naive", "transpose: transposeNaive (the file's other kernels use cooperative groups)",
           "transposeNaive", "tout tin 64 64", (2, 2), (32, 16), TRANSPOSE, module="tr",
           buffers=(O("tout", "device", "float32", 64 * 64), B("tin", "device", "float32", 64 * 64, rand(70))),
           reference=ref_transpose(64, 64)),
    sample("transpose_coalesced", "transpose: transposeCoalesced, a [32][32] tile and cg::sync", "transposeCoalesced",
           "tout tin 64 64", (2, 2), (32, 16), TRANSPOSE, module="tr",
           buffers=(O("tout", "device", "float32", 64 * 64), B("tin", "device", "float32", 64 * 64, rand(71))),
           reference=ref_transpose(64, 64)),
    sample("transpose_no_bank_conflicts", "transpose: transposeNoBankConflicts, a padded [32][33] tile",
           "transposeNoBankConflicts", "tout tin 96 64", (3, 2), (32, 16), TRANSPOSE, module="tr",
           buffers=(O("tout", "device", "float32", 96 * 64), B("tin", "device", "float32", 96 * 64, rand(72))),
           reference=ref_transpose(96, 64)),
    sample("transpose_diagonal", "transpose: transposeDiagonal, blocks renumbered along diagonals (square)",
           "transposeDiagonal", "tout tin 96 96", (3, 3), (32, 16), TRANSPOSE, module="tr",
           buffers=(O("tout", "device", "float32", 96 * 96), B("tin", "device", "float32", 96 * 96, rand(73))),
           reference=ref_transpose(96, 96)),
    sample("transpose_diagonal_wide", "transpose: transposeDiagonal's other branch (width != height)",
           "transposeDiagonal", "tout tin 128 64", (4, 2), (32, 16), TRANSPOSE, module="tr",
           buffers=(O("tout", "device", "float32", 128 * 64), B("tin", "device", "float32", 128 * 64, rand(74))),
           reference=ref_transpose(128, 64)),
]

RUNNABLE = [p for p in PUBLIC if not p.case.refused]
REFUSED = [p for p in PUBLIC if p.case.refused]
