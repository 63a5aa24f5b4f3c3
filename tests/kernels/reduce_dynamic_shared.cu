/* A reduction over dynamic shared memory: `extern __shared__` sized at launch (shared BYTES), split by
 * pointer casts into two arrays — a wrapping unsigned sum and a signed max — per block. */

extern "C" __global__ void sumAndMax(const int *in, unsigned int *blockSum, int *blockMax, int n)
{
    extern __shared__ unsigned int smem[];
    unsigned int *ssum = smem;
    int *smax = (int *)&smem[blockDim.x];

    int tid = threadIdx.x;
    int i = blockIdx.x * blockDim.x + tid;
    ssum[tid] = i < n ? (unsigned int)in[i] : 0u;
    smax[tid] = i < n ? in[i] : (int)0x80000000;
    __syncthreads();

    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            ssum[tid] += ssum[tid + s];
            smax[tid] = max(smax[tid], smax[tid + s]);
        }
        __syncthreads();
    }
    if (tid == 0) {
        blockSum[blockIdx.x] = ssum[0];
        blockMax[blockIdx.x] = smax[0];
    }
}
