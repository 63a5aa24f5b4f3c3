/* Warp-level reductions with shuffles, no shared memory (shorts summed as int: no overflow): __shfl_down_sync folds a warp's values into
 * lane 0; __shfl_xor_sync (a butterfly) leaves the total in every lane; __shfl_sync broadcasts lane 0. */

#define FULL_MASK 0xffffffffu

extern "C" __global__ void warpSumDown(const short *in, int *warpSums)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = in[i];
    for (int offset = warpSize / 2; offset > 0; offset /= 2)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    if ((threadIdx.x & (warpSize - 1)) == 0)
        warpSums[i / warpSize] = v;
}

extern "C" __global__ void warpAllReduceXor(const float *in, float *total, float *first)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[i];
    for (int mask = 16; mask >= 1; mask >>= 1)
        v += __shfl_xor_sync(FULL_MASK, v, mask);
    total[i] = v;
    first[i] = __shfl_sync(FULL_MASK, in[i], 0);
}
