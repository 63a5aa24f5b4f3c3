"""The C++ that course kernels use beyond plain C, on the simulator (issue 34): CUDA's vector types with their
alignment and their one wide access a lane, file-scope constants, namespaces, enums, constexpr, static_assert,
__launch_bounds__ — and what the counts say of a broadcast."""

from __future__ import annotations

import numpy as np
import pytest

COPY4 = """kernel define copy4 <<<
__device__ float4 twice(float4 v) { return make_float4(2 * v.x, 2 * v.y, 2 * v.z, 2 * v.w); }
__global__ void copy4(const float4 *in, float4 *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { float4 v = in[i]; out[i] = twice(v); }
}
>>>"""
COPY1 = ("kernel define copy1 <<< __global__ void copy1(const float *in, float *out, int n) { "
         "int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[i]; } >>>")


def floats(c, name, count):
    return np.array(c.ok(f"show {name} dtype float32 count {count}")["values"], np.float32)


def test_a_float4_copy_is_one_16_byte_access_a_lane(sim):
    sim.ok(COPY4)
    sim.ok(COPY1)
    sim.ok("alloc managed 16KB as a; alloc managed 16KB as b; fill a iota dtype float32")
    wide = sim.ok("launch copy4 a b 1024 grid 4 block 256")["counts"]["global"]["managed"]
    assert (floats(sim, "b", 4096) == 2 * np.arange(4096, dtype=np.float32)).all()
    narrow = sim.ok("launch copy1 a b 4096 grid 16 block 256")["counts"]["global"]["managed"]
    warps = 1024 // 32
    assert wide["requests"] == 2 * warps  # one ld.global.v4 and one st.global.v4 a warp
    assert wide["sectors"] == 2 * warps * 16  # 512 bytes a warp: 16 sectors a request
    assert narrow["sectors"] == wide["sectors"] and narrow["requests"] == 4 * wide["requests"]
    assert wide["useful_bytes"] == wide["bytes"] == 2 * 16384


def test_a_float4_load_off_its_16_byte_alignment_is_misaligned_naming_thread_and_line(sim):
    sim.ok("kernel define mis4 <<< __global__ void mis4(const float *in, float *out) {\n"
           "  float4 v = *reinterpret_cast<const float4 *>(in + 1 + 4 * threadIdx.x);\n"
           "  out[threadIdx.x] = v.x; } >>>")
    sim.ok("alloc device 4KB as a; alloc device 4KB as b; launch mis4 a b grid 1 block 32")
    err = sim.fails("sync")
    assert err["code"] == "CUDA_ERROR_MISALIGNED_ADDRESS"
    assert "read of size 16" in err["message"] and "mis4 (kernel define):2:" in err["message"]
    assert "thread (0,0,0) in block (0,0,0)" in err["message"]


def test_vector_types_have_cudas_sizes_and_alignments(sim):
    expected = {"char1": (1, 1), "char2": (2, 2), "char3": (3, 1), "char4": (4, 4), "uchar4": (4, 4),
                "short2": (4, 4), "short3": (6, 2), "short4": (8, 8), "ushort4": (8, 8), "int2": (8, 8),
                "int3": (12, 4), "int4": (16, 16), "uint4": (16, 16), "long2": (16, 16), "ulong3": (24, 8),
                "longlong2": (16, 16), "ulonglong4": (32, 16), "float1": (4, 4), "float2": (8, 8),
                "float3": (12, 4), "float4": (16, 16), "double1": (8, 8), "double2": (16, 16),
                "double3": (24, 8), "double4": (32, 16)}
    names = list(expected)
    body = " ".join(f"out[{2 * k}] = sizeof({t}); out[{2 * k + 1}] = alignof({t});" for k, t in enumerate(names))
    sim.ok(f"kernel define sizes <<< __global__ void sizes(unsigned *out) {{ {body} }} >>>")
    sim.ok(f"alloc managed {8 * len(names)}B as o; launch sizes o grid 1 block 1; sync")
    got = sim.ok(f"show o dtype uint32 count {2 * len(names)}")["values"]
    assert dict(zip(names, zip(got[::2], got[1::2]))) == expected


def test_vectors_as_parameters_in_shared_and_local_arrays_with_make_and_members(sim):
    sim.ok("""kernel define vmix <<<
__device__ int dot(int4 a, int4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
__global__ void vmix(const int4 *in, int *out, double2 *dd, uchar4 *bytes) {
  __shared__ int4 tile[64];
  int2 pair[2];
  int t = threadIdx.x;
  tile[t] = in[t];
  pair[0] = make_int2(t, -t);
  pair[1] = pair[0];
  __syncthreads();
  int4 other = tile[63 - t];
  out[t] = dot(tile[t], other) + pair[1].y;
  dd[t] = make_double2(t * 0.5, other.w);
  bytes[t] = make_uchar4(t, t + 1, 255, (unsigned char)(t * 7));
}
>>>""")
    sim.ok("alloc managed 1KB as i4; alloc managed 256B as o; alloc managed 1KB as d2; alloc managed 256B as u4; "
           "fill i4 iota dtype int32; launch vmix i4 o d2 u4 grid 1 block 64; sync")
    v = np.arange(256, dtype=np.int64).reshape(64, 4)
    t = np.arange(64)
    want = (v * v[::-1]).sum(1) - t
    assert sim.ok("show o dtype int32 count 64")["values"] == want.tolist()
    d = np.array(sim.ok("show d2 dtype float64 count 128")["values"]).reshape(64, 2)
    assert (d[:, 0] == t * 0.5).all() and (d[:, 1] == v[::-1, 3]).all()
    b = np.array(sim.ok("show u4 dtype uint8 count 256")["values"]).reshape(64, 4)
    assert (b == np.stack([t, t + 1, np.full(64, 255), (t * 7) % 256], 1)).all()


def test_a_broadcast_load_uses_at_most_every_byte_it_moved(sim):
    sim.ok("kernel define bcast <<< __global__ void bcast(const float *a, float *out) "
           "{ out[threadIdx.x] = a[0]; } >>>")
    sim.ok("kernel define sparse <<< __global__ void sparse(const float *a, float *out) "
           "{ if (threadIdx.x % 2) out[threadIdx.x] = a[threadIdx.x / 4]; } >>>")
    sim.ok("alloc managed 4KB as a; alloc managed 4KB as b")
    got = sim.ok("launch bcast a b grid 1 block 32")["counts"]["global"]["managed"]
    assert (got["sectors"], got["useful_bytes"]) == (5, 4 + 128)  # one float read, 32 written
    assert got["efficiency"] <= 1.0
    got = sim.ok("launch sparse a b grid 1 block 64")["counts"]["global"]["managed"]
    assert (got["sectors"], got["useful_bytes"]) == (10, 2 * (8 * 4 + 16 * 4))  # per warp: 8 distinct floats read


FILE_CONSTS = """kernel define consts <<<
const int N = 256;
const size_t DSIZE = 1 << 20;
constexpr float PI = 3.14159f;
const float THIRD = 1.0 / 3.0;
static const int TWICE = 2 * N;
int host_only = 3;
__global__ void consts(float *out, unsigned long long *sizes) {
  __shared__ float s[N];
  int i = threadIdx.x;
  s[i] = i + THIRD;
  __syncthreads();
  float acc = 0;
  for (int j = 0; j < N / 64; ++j) acc += s[(i + j) % N];
  out[i] = acc * PI;
  if (i == 0) { sizes[0] = DSIZE; sizes[1] = TWICE; sizes[2] = sizeof(s); }
}
>>>"""


def test_file_scope_consts_are_values_in_device_code(sim):
    sim.ok(FILE_CONSTS)
    sim.ok("alloc managed 1KB as o; alloc managed 24B as z; launch consts o z grid 1 block 256; sync")
    assert sim.ok("show z dtype uint64 count 3")["values"] == [1 << 20, 512, 1024]
    f = np.float32
    s = np.arange(256, dtype=f) + f(1.0 / 3.0)
    acc = np.zeros(256, f)
    for j in range(4):
        acc = (acc + s[(np.arange(256) + j) % 256]).astype(f)
    assert (floats(sim, "o", 256) == (acc * f(3.14159)).astype(f)).all()


@pytest.mark.parametrize("decl, use, said", [
    ("int hostOnly = 3;", "hostOnly", "nvcc refuses it in device code too"),
    ("const float table[3] = {1, 2, 3};", "table[1]", "the file-scope const 'table'"),
])
def test_file_scope_variables_device_code_cannot_read_are_refused_by_name(sim, decl, use, said):
    err = sim.fails(f"kernel define k <<< {decl}\n__global__ void k(float *o) {{ o[0] = {use}; }} >>>")
    assert err["code"] in ("NOT_SUPPORTED_ON_SIM", "USAGE") and ":2:" in err["message"]
    assert said in err["message"] or "host" in err["message"]


DECLARATIONS = """kernel define decls <<<
namespace geo {
  const int SIDE = 4;
  enum class Axis { X = 1, Y = 10 };
  __device__ __noinline__ int area(int a) { return a * SIDE; }
  namespace inner { __device__ int area(int a) { return a + 100; } }
}
namespace { __device__ int less(int a) { return a - 1; } }
enum Mode { OFF, ON = 7 };
__host__ __device__ constexpr int cube(int x) { return x * x * x; }
constexpr int sq(int x) { return x * x; }
static_assert(sizeof(float4) == 16, "float4");
__global__ void __launch_bounds__(256, 2) decls(int *out) {
  static_assert(geo::SIDE == 4, "side");
  static const int ONE = 1;
  int local[sq(3)];
  local[8] = ONE;
  int i = threadIdx.x;
  out[i] = geo::area(i) + geo::inner::area(i) + less(i) + (int)geo::Axis::Y + ON + cube(2) + local[8];
}
>>>"""


def test_namespaces_enums_constexpr_static_assert_and_launch_bounds(sim):
    sim.ok(DECLARATIONS)
    sim.ok("alloc managed 256B as o; launch decls o grid 1 block 64; sync")
    i = np.arange(64)
    assert sim.ok("show o dtype int32 count 64")["values"] == (4 * i + i + 100 + i - 1 + 10 + 7 + 8 + 1).tolist()


def test_a_constexpr_host_function_called_in_device_code_is_refused_as_nvcc_refuses_it(sim):
    err = sim.fails("kernel define k <<< constexpr int sq(int x) { return x * x; }\n"
                    "__global__ void k(int *o) { o[0] = sq(threadIdx.x); } >>>")
    assert err["code"] == "NOT_SUPPORTED_ON_SIM" and ":2:" in err["message"]
    assert "constexpr host function 'sq'" in err["message"] and "--expt-relaxed-constexpr" in err["message"]


def test_a_trivial_device_function_is_inlined_into_the_callers_fma_but_a_noinline_one_is_not(sim):
    from tests.kernel_corpus import fma32

    sim.ok("""kernel define inl <<<
__device__ float sq(float x) { return x * x; }
__device__ __noinline__ float sqn(float x) { return x * x; }
__global__ void inl(const float *a, float *out) {
  int i = threadIdx.x;
  float x = a[2 * i], y = a[2 * i + 1];
  out[2 * i] = sq(x) - y;
  out[2 * i + 1] = sqn(x) - y;
}
>>>""")
    sim.ok("alloc managed 2KB as a; alloc managed 2KB as o; fill a random dtype float32 seed 7")
    sim.ok("launch inl a o grid 1 block 256; sync")
    x, y = floats(sim, "a", 512).reshape(256, 2).T
    got = floats(sim, "o", 512).reshape(256, 2)
    assert (got[:, 0] == fma32(x, x, -y)).all()  # inlined: the product meets the difference
    assert (got[:, 1] == x * x - y).all() and (got[:, 0] != got[:, 1]).any()  # a returned value, rounded


def test_racecheck_sees_each_word_of_a_vectors_shared_store_and_no_race_in_distinct_global_ones(sim):
    sim.ok("""kernel define vrace <<<
__global__ void vrace(float4 *out, float *seen) {
  __shared__ float4 tile[64];
  int t = threadIdx.x;
  tile[t] = make_float4(t, t + 1, t + 2, t + 3);
  seen[t] = tile[(t + 1) % 64].z;
  out[t] = tile[t];
}
>>>""")
    sim.ok("alloc managed 1KB as o; alloc managed 256B as s; launch vrace o s grid 1 block 64")
    warnings = [w for o in sim.run("sync") if o["cmd"] == "(kernel output)" for w in o["result"]["warnings"]]
    assert len(warnings) == 1 and "read-after-write" in warnings[0]
    assert "byte 24 of the block's shared memory" in warnings[0]  # tile[1].z: the word thread 1 wrote


def test_the_contraction_rules_fuse_as_nvccs_back_end_does():
    from cudashell.simt import contract

    a, b, c, d, e = (contract.leaf(np.float32(k)) for k in (1, 2, 3, 4, 5))
    ab, cd = ("mul", a, b), ("mul", c, d)
    assert contract.add(ab, cd) == ("fma", a, b, cd)  # the left product first
    assert contract.sub(c, ab) == ("fma", contract.leaf(np.float32(-1)), b, c)  # c - a*b: fma(-a, b, c)
    assert contract.add(contract.add(ab, cd), e) == ("add", ("fma", a, b, cd), e)  # an fma is not fused again
    diff = contract.sub(contract.add(ab, cd), contract.add(ab, cd))  # norm2(r) - norm2(p)
    assert diff == ("sub", ("fma", a, b, cd), ("fma", a, b, cd))
    assert contract.sub(contract.add(ab, cd), e) == ("sub", ("fma", a, b, cd), e)
    assert contract.sub(contract.add(ab, cd), ("mul", e, e)) == ("fma", ("leaf", np.float32(-5)), e,
                                                                  ("fma", a, b, cd))  # a*b + c*d - e*e
    assert contract.add(e, ("neg", ab)) == contract.sub(e, ab)  # e + -(a*b) is e - a*b
    assert contract.add(a, b) == ("add", a, b)  # nothing to fuse: one rounded add
    assert contract.value(contract.sub(contract.add(ab, cd), e), np.dtype(np.float32)) == np.float32(9)


def test_a_float4_stored_from_braces_is_one_16_byte_store_a_lane(sim):
    sim.ok("kernel define braces <<< __global__ void braces(float4 *o) { int i = threadIdx.x;\n"
           "o[i] = {1.0f, 2.0f, (float)i, 4.0f}; float4 v = {5.0f, 6.0f, 7.0f, 8.0f}; if (i == 0) o[32] = v; } >>>")
    sim.ok("alloc managed 1KB as o")
    got = sim.ok("launch braces o grid 1 block 32")["counts"]["global"]["managed"]
    assert (got["requests"], got["sectors"]) == (2, 16 + 1)
    sim.ok("sync")
    want = np.array([[1, 2, i, 4] for i in range(32)] + [[5, 6, 7, 8]], np.float32).ravel()
    assert (floats(sim, "o", 4 * 33) == want).all()
