/* A device-side assert that fails for one element: the kernel stops and the context reports
 * CUDA_ERROR_ASSERT at the next sync. */

extern "C" __global__ void checkPositive(const int *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        assert(data[i] > 0);
}
