#include "rowsum.cuh"

__device__ float sumSpan(Span s, float scale = 1.0f)
{
    float t = 0;
    for (int k = 0; k < s.n; ++k)
        t += s.p[k];
    return t * scale;
}

template <int STEPS>
__device__ __forceinline__ float warpSum(float v)
{
#pragma unroll
    for (int d = STEPS; d > 0; d /= 2)
        v += __shfl_down_sync(0xffffffff, v, d);
    return v;
}

extern "C" __global__ void rowsum(const float *a, float *rows, float *total, int n, int width)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    float s = 0;
    if (r < n) {
        Span row = { a + r * width, width };
        s = clampTo(sumSpan(row), 0.0f, 1e6f);
        rows[r] = s;
    }
    s = warpSum<WARP / 2>(s);
    if (threadIdx.x % warpSize == 0)
        atomicAdd(total, s);
}
