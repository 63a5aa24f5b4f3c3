/* A one-block work-efficient exclusive scan (Blelloch): an up-sweep builds partial sums in a tree in
 * shared memory, the root is cleared, and a down-sweep pushes the prefixes back down. Each thread owns
 * two elements; n = 2 * blockDim.x, a power of two. */

#define MAX_N 1024

extern "C" __global__ void blellochScan(const unsigned int *in, unsigned int *out, int n)
{
    __shared__ unsigned int temp[MAX_N];
    int tid = threadIdx.x;
    int offset = 1;

    temp[2 * tid] = in[2 * tid];
    temp[2 * tid + 1] = in[2 * tid + 1];

    for (int d = n >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (tid < d) {
            int ai = offset * (2 * tid + 1) - 1;
            int bi = offset * (2 * tid + 2) - 1;
            temp[bi] += temp[ai];
        }
        offset *= 2;
    }

    if (tid == 0)
        temp[n - 1] = 0;

    for (int d = 1; d < n; d *= 2) {
        offset >>= 1;
        __syncthreads();
        if (tid < d) {
            int ai = offset * (2 * tid + 1) - 1;
            int bi = offset * (2 * tid + 2) - 1;
            unsigned int t = temp[ai];
            temp[ai] = temp[bi];
            temp[bi] += t;
        }
    }
    __syncthreads();

    out[2 * tid] = temp[2 * tid];
    out[2 * tid + 1] = temp[2 * tid + 1];
}
