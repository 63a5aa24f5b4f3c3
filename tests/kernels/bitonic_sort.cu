/* Bitonic sort in shared memory: each block sorts its own segment of N keys, one key per thread, with
 * compare-and-swap passes between barriers (k: size of the bitonic runs, j: the partner distance). */

#define N 256

extern "C" __global__ void bitonicSortShared(unsigned int *keys)
{
    __shared__ unsigned int s[N];
    unsigned int tid = threadIdx.x;
    unsigned int *seg = keys + blockIdx.x * N;
    s[tid] = seg[tid];
    __syncthreads();

    for (unsigned int k = 2; k <= N; k <<= 1) {
        for (unsigned int j = k >> 1; j > 0; j >>= 1) {
            unsigned int ixj = tid ^ j;
            if (ixj > tid) {
                bool ascending = (tid & k) == 0;
                unsigned int a = s[tid], b = s[ixj];
                if ((a > b) == ascending) {
                    s[tid] = b;
                    s[ixj] = a;
                }
            }
            __syncthreads();
        }
    }
    seg[tid] = s[tid];
}
