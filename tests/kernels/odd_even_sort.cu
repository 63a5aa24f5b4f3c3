/* Odd-even transposition sort of floats in one block, as a do/while that runs until a round swaps
 * nothing: a block-uniform, data-dependent loop around barriers. Thread t owns the pairs (2t, 2t+1)
 * and (2t+1, 2t+2). The number of rounds is written out too. */

#define MAX_N 512

extern "C" __global__ void oddEvenSort(float *data, int n, int *rounds)
{
    __shared__ float s[MAX_N];
    __shared__ int changed;
    int tid = threadIdx.x;
    for (int i = tid; i < n; i += blockDim.x)
        s[i] = data[i];

    int r = 0;
    do {
        __syncthreads();
        if (tid == 0)
            changed = 0;
        __syncthreads();
        for (int phase = 0; phase < 2; ++phase) {
            int i = 2 * tid + phase;
            if (i + 1 < n && s[i] > s[i + 1]) {
                float t = s[i];
                s[i] = s[i + 1];
                s[i + 1] = t;
                changed = 1;
            }
            __syncthreads();
        }
        ++r;
    } while (changed);

    for (int i = tid; i < n; i += blockDim.x)
        data[i] = s[i];
    if (tid == 0)
        *rounds = r;
}
