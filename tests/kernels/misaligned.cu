/* A misaligned access: a 4-byte store through a pointer cast from a byte pointer at an offset that is
 * not a multiple of 4 — CUDA_ERROR_MISALIGNED_ADDRESS at the next sync. */

extern "C" __global__ void storeIntAt(unsigned char *bytes, int offset, int value)
{
    *(int *)(bytes + offset) = value;
}
