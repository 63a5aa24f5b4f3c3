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
    "__restrict__": "",
    "__noinline__": "",
    "__inline__": "inline",
}

_MATH1 = ["sqrt", "rsqrt", "fabs", "floor", "ceil", "exp", "exp2", "log", "log2", "log10", "sin", "cos", "tan",
          "trunc", "round", "cbrt"]
_MATH2 = ["fmin", "fmax", "pow", "fmod", "atan2", "hypot"]
_ATOMIC_TYPES = ["int", "unsigned int", "unsigned long long", "float", "double"]
_INT_TYPES = ["int", "unsigned int", "unsigned long long"]


def _decls() -> str:
    out = [
        "#define __global__ __attribute__((global))",
        "#define __device__ __attribute__((device))",
        "#define __host__ __attribute__((host))",
        "#define __shared__ __attribute__((shared))",
        "#define __constant__ __attribute__((constant))",
        '#define __managed__ __attribute__((device)) __attribute__((annotate("__managed__")))',
        "#define __forceinline__ __attribute__((always_inline))",
        "#define __align__(n) __attribute__((aligned(n)))",
        "typedef unsigned long size_t;",
        "typedef long ptrdiff_t;",
        "typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t; "
        "typedef unsigned short uint16_t; typedef int int32_t; typedef unsigned int uint32_t; "
        "typedef long long int64_t; typedef unsigned long long uint64_t;",
        "struct uint3 { unsigned int x, y, z; };",
        "struct dim3 { unsigned int x, y, z; };",
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
        "__device__ float __fmaf_rn(float, float, float); __device__ double __fma_rn(double, double, double);",
        "__device__ float fmaf(float, float, float); __device__ double fma(double, double, double);",
        "__device__ float __fdividef(float, float); __device__ float __saturatef(float);",
        "__device__ float __expf(float); __device__ float __logf(float); __device__ float __sinf(float); "
        "__device__ float __cosf(float); __device__ float __powf(float, float); __device__ float __log2f(float); "
        "__device__ float __exp10f(float); __device__ float __tanf(float);",
        "__device__ unsigned __ballot_sync(unsigned, int); __device__ int __any_sync(unsigned, int); "
        "__device__ int __all_sync(unsigned, int); __device__ unsigned __activemask();",
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


DECLS = _decls()
DECL_LINES = DECLS.count("\n")
