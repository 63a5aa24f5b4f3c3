/* Shared-memory tree reduction (Harris's "reduce #5"): each thread adds two elements while loading,
 * the block halves the active threads each step, and the last warp finishes in step with __syncwarp.
 * One partial sum per block; the order of the float additions is fixed by the tree. */

#define BLOCK 256

extern "C" __global__ void reduceSum(const float *in, float *partial, int n)
{
    __shared__ float sdata[BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;

    float v = 0.0f;
    if (i < n)
        v = in[i];
    if (i + blockDim.x < n)
        v += in[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();

    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s)
            sdata[tid] += sdata[tid + s];
        __syncthreads();
    }

    if (tid < 32) {
        float w = sdata[tid] + sdata[tid + 32];
        for (int offset = 16; offset > 0; offset >>= 1) {
            __syncwarp();
            sdata[tid] = w;
            __syncwarp();
            w += sdata[tid + offset];
        }
        if (tid == 0)
            partial[blockIdx.x] = w;
    }
}
