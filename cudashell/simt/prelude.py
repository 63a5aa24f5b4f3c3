"""What nvcc's headers give a kernel, declared for clang (which parses with -nocudainc): the qualifiers,
the thread indices, and the device functions the interpreter implements. Clang resolves overloads against
these, so a call reaches the interpreter with its arguments already converted to the parameter types."""

# macros for the preprocessor pass (pcpp), before clang sees the source
MACROS = {
    "__CUDACC__": "1",
    "__CUDA_ARCH__": "900",
    "__NVCC__": "1",
    "NULL": "0",
    "assert(e)": "__cush_assert((e), #e)",
    "__noinline__": "__attribute__((noinline))",
    "__inline__": "inline",
}

_MATH1 = ["sqrt", "rsqrt", "fabs", "floor", "ceil", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan",
          "trunc", "round", "cbrt"]
_MATH2 = ["fmin", "fmax", "pow", "fmod", "atan2", "hypot"]
_ATOMIC_TYPES = ["int", "unsigned int", "unsigned long long", "float", "double"]
_INT_TYPES = ["int", "unsigned int", "unsigned long long"]
# CUDA's vector types (vector_types.h): name → (element type, the alignment of the 1-, 2-, 3- and 4-vector); a
# float4 is 16-aligned so that one ld.global.v4 moves it, a float3 only 4-aligned
_VECTORS = {
    "char": ("signed char", (1, 2, 1, 4)), "uchar": ("unsigned char", (1, 2, 1, 4)),
    "short": ("short", (2, 4, 2, 8)), "ushort": ("unsigned short", (2, 4, 2, 8)),
    "int": ("int", (4, 8, 4, 16)), "uint": ("unsigned int", (4, 8, 4, 16)),
    "long": ("long", (8, 16, 8, 16)), "ulong": ("unsigned long", (8, 16, 8, 16)),
    "longlong": ("long long", (8, 16, 8, 16)), "ulonglong": ("unsigned long long", (8, 16, 8, 16)),
    "float": ("float", (4, 8, 4, 16)), "double": ("double", (8, 16, 8, 16)),
}
_FIELDS = ("x", "y", "z", "w")


def _vector_types() -> list[str]:
    """Each vector type as a struct of its alignment, and its make_ function (a built-in: builtins.py)."""
    out = []
    for short, (elem, aligns) in _VECTORS.items():
        for n, align in zip((1, 2, 3, 4), aligns):
            name = f"{short}{n}"
            if name != "uint3":  # declared with the thread indices
                out.append(f"struct __attribute__((aligned({align}))) {name} {{ {elem} {', '.join(_FIELDS[:n])}; }};")
            params = ", ".join([elem] * n)
            out.append(f"__device__ {name} make_{name}({params});")
    return out


VECTOR_MAKERS = frozenset(f"make_{short}{n}" for short in _VECTORS for n in (1, 2, 3, 4))


def _decls() -> str:
    out = [
        "#define __global__ __attribute__((global))",
        "#define __device__ __attribute__((device))",
        "#define __host__ __attribute__((host))",
        "#define __shared__ __attribute__((shared))",
        "#define __constant__ __attribute__((constant))",
        '#define __managed__ __attribute__((device)) __attribute__((annotate("__managed__")))',
        "#define __forceinline__ __attribute__((always_inline))",
        "#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))",
        "#define __align__(n) __attribute__((aligned(n)))",
        "typedef unsigned long size_t;",
        "typedef long ptrdiff_t;",
        "typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; "
        "typedef unsigned short uint16_t; typedef int int32_t; typedef unsigned int uint32_t; "
        "typedef long long int64_t; typedef unsigned long long uint64_t;",
        "struct uint3 { unsigned int x, y, z; };",
        "struct dim3 { unsigned int x, y, z; };",
        *_vector_types(),
        "extern const __device__ uint3 threadIdx; extern const __device__ uint3 blockIdx;",
        "extern const __device__ dim3 blockDim; extern const __device__ dim3 gridDim;",
        "extern const __device__ int warpSize;",
        "__device__ void __syncwarp(unsigned mask = 0xffffffff);",
        "__device__ int __syncthreads_count(int); __device__ int __syncthreads_and(int); "
        "__device__ int __syncthreads_or(int);",
        "__device__ void __threadfence(); __device__ void __threadfence_block();",
        "__device__ void __cush_assert(bool, const char *);",
        'extern "C" __device__ int printf(const char *, ...);',
        "__device__ int __popc(unsigned); __device__ int __popcll(unsigned long long);",
        "__device__ int __clz(int); __device__ int __clzll(long long);",
        "__device__ int __ffs(int); __device__ int __ffsll(long long);",
        "__device__ unsigned __brev(unsigned);",
        "__device__ int __mul24(int, int); __device__ unsigned __umul24(unsigned, unsigned);",
        "__device__ float __fmaf_rn(float, float, float); __device__ double __fma_rn(double, double, double);",
        "__device__ float fmaf(float, float, float); __device__ double fma(double, double, double);",
        "__device__ float __fdividef(float, float); __device__ float __saturatef(float);",
        "__device__ float __expf(float); __device__ float __logf(float); __device__ float __sinf(float); "
        "__device__ float __cosf(float); __device__ float __powf(float, float); __device__ float __log2f(float); "
        "__device__ float __exp10f(float); __device__ float __tanf(float);",
        "__device__ unsigned __ballot_sync(unsigned, int); __device__ int __any_sync(unsigned, int); "
        "__device__ int __all_sync(unsigned, int); __device__ unsigned __activemask();",
        "__device__ int __reduce_add_sync(unsigned, int); __device__ unsigned __reduce_add_sync(unsigned, unsigned); "
        "__device__ int __reduce_min_sync(unsigned, int); __device__ unsigned __reduce_min_sync(unsigned, unsigned); "
        "__device__ int __reduce_max_sync(unsigned, int); __device__ unsigned __reduce_max_sync(unsigned, unsigned); "
        "__device__ unsigned __reduce_and_sync(unsigned, unsigned); __device__ unsigned __reduce_or_sync(unsigned, "
        "unsigned); __device__ unsigned __reduce_xor_sync(unsigned, unsigned);",
    ]
    for name in _MATH1:
        out.append(f"__device__ float {name}f(float); __device__ double {name}(double); "
                   f"__device__ float {name}(float);")
    for name in _MATH2:
        out.append(f"__device__ float {name}f(float, float); __device__ double {name}(double, double); "
                   f"__device__ float {name}(float, float);")
    for t in ["int", "unsigned int", "long long", "unsigned long long", "float", "double"]:
        out.append(f"__device__ {t} min({t}, {t}); __device__ {t} max({t}, {t});")
    for a, b, r in (("int", "unsigned int", "unsigned int"), ("long long", "unsigned long long", "unsigned long long"),
                    ("float", "double", "double")):  # CUDA's mixed overloads: the wider or unsigned type wins
        out.append(f"__device__ {r} min({a}, {b}); __device__ {r} min({b}, {a}); "
                   f"__device__ {r} max({a}, {b}); __device__ {r} max({b}, {a});")
    out.append("__device__ int abs(int); __device__ long long llabs(long long); __device__ float abs(float);"
               " __device__ double abs(double); __device__ long long abs(long long);")
    for t in ["int", "unsigned int", "long long", "unsigned long long", "float", "double"]:
        for shfl in ("__shfl_sync(unsigned, {t}, int, int w = 32)", "__shfl_up_sync(unsigned, {t}, unsigned, int w = 32)",
                     "__shfl_down_sync(unsigned, {t}, unsigned, int w = 32)",
                     "__shfl_xor_sync(unsigned, {t}, int, int w = 32)"):
            out.append(f"__device__ {t} " + shfl.format(t=t) + ";")
    for t in ["int", "unsigned int", "float", "double", "long long", "unsigned long long", "char", "unsigned char",
              "short", "unsigned short"]:
        out.append(f"__device__ {t} __ldg(const {t} *);")
    for t in _ATOMIC_TYPES:
        for op in ("Add", "Exch"):
            out.append(f"__device__ {t} atomic{op}({t} *, {t});")
    for t in ["int", "unsigned int"]:
        out.append(f"__device__ {t} atomicSub({t} *, {t});")
    for t in ["int", "unsigned int", "long long", "unsigned long long"]:
        for op in ("Min", "Max"):
            out.append(f"__device__ {t} atomic{op}({t} *, {t});")
    for t in _INT_TYPES:
        for op in ("And", "Or", "Xor"):
            out.append(f"__device__ {t} atomic{op}({t} *, {t});")
    out.append("__device__ unsigned atomicInc(unsigned *, unsigned); __device__ unsigned atomicDec(unsigned *, unsigned);")
    for t in ["int", "unsigned int", "unsigned long long", "unsigned short"]:
        out.append(f"__device__ {t} atomicCAS({t} *, {t}, {t});")
    out.append("__device__ int __float_as_int(float); __device__ float __int_as_float(int); "
               "__device__ unsigned __float_as_uint(float); __device__ float __uint_as_float(unsigned); "
               "__device__ long long __double_as_longlong(double); __device__ double __longlong_as_double(long long);")
    return "\n".join(out) + "\n"


# Cooperative groups (the block-level part): classes and functions declared, never defined, so that clang types
# the user's code and resolves overloads; a call to any of them becomes a built-in of coop.py (coopfront.py).
# A group handle is one 64-bit register value (coop.py says what its bits hold), so the classes have no fields.
_COOP = """
namespace cooperative_groups {
struct thread_group {
  __device__ void sync() const; __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const; __device__ unsigned long long thread_rank() const;
  __device__ bool is_valid() const; __device__ unsigned int get_type() const;
};
struct thread_block : thread_group {
  __device__ void sync() const; __device__ unsigned int thread_rank() const; __device__ unsigned int size() const;
  __device__ unsigned int num_threads() const; __device__ dim3 group_index() const;
  __device__ dim3 thread_index() const; __device__ dim3 dim_threads() const; __device__ dim3 group_dim() const;
};
struct grid_group {
  __device__ void sync() const; __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const; __device__ unsigned long long thread_rank() const;
  __device__ unsigned long long block_rank() const; __device__ unsigned long long num_blocks() const;
  __device__ bool is_valid() const; __device__ dim3 dim_blocks() const; __device__ dim3 block_index() const;
};
struct multi_grid_group { __device__ void sync() const; };
struct cluster_group { __device__ void sync() const; };
struct coalesced_group : thread_group {
  __device__ void sync() const; __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const; __device__ unsigned long long thread_rank() const;
  __device__ unsigned long long meta_group_rank() const; __device__ unsigned long long meta_group_size() const;
  template <class T> __device__ T shfl(T v, unsigned int src) const;
  template <class T> __device__ T shfl_up(T v, unsigned int delta) const;
  template <class T> __device__ T shfl_down(T v, unsigned int delta) const;
  __device__ int any(int p) const; __device__ int all(int p) const; __device__ unsigned int ballot(int p) const;
  template <class T> __device__ unsigned int match_any(T v) const;
  template <class T> __device__ unsigned int match_all(T v, int &pred) const;
};
template <unsigned int N> struct thread_block_tile : thread_group {
  __device__ void sync() const; __device__ unsigned long long size() const;
  __device__ unsigned long long num_threads() const; __device__ unsigned long long thread_rank() const;
  __device__ unsigned long long meta_group_rank() const; __device__ unsigned long long meta_group_size() const;
  template <class T> __device__ T shfl(T v, int src) const;
  template <class T> __device__ T shfl_up(T v, unsigned int delta) const;
  template <class T> __device__ T shfl_down(T v, unsigned int delta) const;
  template <class T> __device__ T shfl_xor(T v, unsigned int mask) const;
  __device__ int any(int p) const; __device__ int all(int p) const; __device__ unsigned int ballot(int p) const;
  template <class T> __device__ unsigned int match_any(T v) const;
  template <class T> __device__ unsigned int match_all(T v, int &pred) const;
};
__device__ thread_block this_thread_block(); __device__ grid_group this_grid();
__device__ coalesced_group coalesced_threads();
__device__ multi_grid_group this_multi_grid(); __device__ cluster_group this_cluster();
__device__ coalesced_group binary_partition(const thread_group &g, bool pred);
template <class L> __device__ coalesced_group labeled_partition(const thread_group &g, L label);
template <class G, class T> __device__ void memcpy_async(const G &g, T *dst, const T *src, unsigned long n);
template <class G> __device__ void wait(const G &g);
template <unsigned int N, class G> __device__ void wait_prior(const G &g);
template <class... A> __device__ void invoke_one(A... a) {}  // bodies: a lambda argument's type has no linkage
template <class... A> __device__ int invoke_one_broadcast(A... a) { return 0; }
template <class... A> __device__ int reduce_update_async(A... a) { return 0; }
template <class... A> __device__ void reduce_store_async(A... a) {}
template <class G> __device__ auto thread_rank(const G &g) -> decltype(g.thread_rank());
template <class G> __device__ auto group_size(const G &g) -> decltype(g.num_threads());
__device__ void sync(const thread_group &g); __device__ void sync(const grid_group &g);
__device__ thread_group tiled_partition(const thread_group &parent, unsigned int size);
template <unsigned int N, class P> __device__ thread_block_tile<N> tiled_partition(const P &parent);
template <class T> struct plus { __device__ T operator()(T a, T b) const; };
template <class T> struct less { __device__ T operator()(T a, T b) const; };
template <class T> struct greater { __device__ T operator()(T a, T b) const; };
template <class T> struct bit_and { __device__ T operator()(T a, T b) const; };
template <class T> struct bit_or { __device__ T operator()(T a, T b) const; };
template <class T> struct bit_xor { __device__ T operator()(T a, T b) const; };
template <class G, class T, class Op> __device__ auto reduce(const G &g, T v, Op op) -> decltype(op(v, v))
{ return op(v, v); }  // bodies never run: a lambda operator's type has no linkage, which a declaration refuses
template <class G, class T, class Op> __device__ auto inclusive_scan(const G &g, T v, Op op) -> decltype(op(v, v))
{ return op(v, v); }
template <class G, class T, class Op> __device__ auto exclusive_scan(const G &g, T v, Op op) -> decltype(op(v, v))
{ return op(v, v); }
template <class G, class T> __device__ T inclusive_scan(const G &g, T v);
template <class G, class T> __device__ T exclusive_scan(const G &g, T v);
}
"""

DECLS = _decls() + _COOP
DECL_LINES = DECLS.count("\n")
