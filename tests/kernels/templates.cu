/* Function templates and the preprocessor: a template with an int and a type parameter called with
 * explicit arguments (sumN<WIDTH, float>), templates whose types are deduced (maxOf), a
 * __forceinline__ template, #pragma unroll, macros with arguments from an #included header, #if, and
 * NULL. The float sum adds in index order, starting from 0; the int pair is summed as unsigned
 * (through a pointer cast), so it wraps instead of overflowing. */

#include "common.cuh"

template <int N, typename T>
__device__ T sumN(const T *p)
{
    T s = 0;
#pragma unroll
    for (int k = 0; k < N; ++k)
        s += p[k];
    return s;
}

template <typename T>
__device__ T maxOf(T a, T b)
{
    return a > b ? a : b;
}

template <typename T, int SCALE>
__device__ __forceinline__ T scaled(T v)
{
    return v * SCALE;
}

extern "C" __global__ void templatedOps(const float *xf, const int *xi, float *outf, int *outi, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const float *row = n > 0 ? xf + WIDTH * i : NULL;
    if (row != NULL) {
        outf[2 * i] = sumN<WIDTH, float>(row);
        outf[2 * i + 1] = maxOf(row[0], 0.5f);
    }
    int a = xi[2 * i], b = xi[2 * i + 1];
    outi[3 * i] = maxOf(a, b);
    outi[3 * i + 1] = scaled<int, 3>(SQUARE(a & 0xff));
#if WIDTH == 4
    outi[3 * i + 2] = CLAMP(b % 1000, -100, 100) + (int)(sumN<2>((const unsigned int *)xi + 2 * i) % 7u);
#else
    outi[3 * i + 2] = -1;
#endif
}
