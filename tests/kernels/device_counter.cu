/* A counter in a __device__ variable with an initialiser: the module starts it at 5, every thread that sees
 * an odd value bumps it with atomicAdd, and the host reads it back (cudaMemcpyFromSymbol). A second counter,
 * without an initialiser, starts at zero and counts every thread. */

__device__ unsigned int oddCount = 5;
__device__ unsigned long long seen;

extern "C" __global__ void countOdd(const int *values, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (values[i] & 1)
        atomicAdd(&oddCount, 1u);
    atomicAdd(&seen, 1ull);
}
