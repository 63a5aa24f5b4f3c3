/* An out-of-bounds write: every thread writes a[index + i], with index a gigabyte past the 64 ints
 * allocated. A write just past the end usually lands in the same 2 MiB page and goes unnoticed on a real
 * GPU; a gigabyte past it, nothing is mapped, and the fault surfaces at the next sync as
 * CUDA_ERROR_ILLEGAL_ADDRESS. (Some distances are worse: 4 GiB past an allocation the H100 reports
 * CUDA_ERROR_INVALID_ADDRESS_SPACE, the address falling in the shared-memory window.) */

extern "C" __global__ void writeFarPastTheEnd(int *a, long long index)
{
    long long i = blockIdx.x * blockDim.x + threadIdx.x;
    a[index + i] = (int)i;
}
