/* A write to host memory registered read-only (cudaHostRegisterReadOnly): the kernel may read it, and
 * faults when it writes — CUDA_ERROR_ILLEGAL_ADDRESS at the next sync; the host's bytes stay as they were. */

extern "C" __global__ void scaleInPlace(int *data, int n, int factor)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        data[i] *= factor;
}
