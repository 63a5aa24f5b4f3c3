/* A histogram kept in a __device__ table: the host writes its starting counts (cudaMemcpyToSymbol), a
 * grid-stride loop adds one per byte with atomicAdd, and the host reads the table back. */

#define BINS 64

__device__ unsigned int table[BINS];

extern "C" __global__ void histogramToTable(const unsigned char *bytes, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&table[bytes[i] % BINS], 1u);
}
