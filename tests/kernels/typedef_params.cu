/* Parameters spelled through typedefs, and an input as an unsized array `const real in[]` (a pointer, as C
 * says). The commented-out signature above the real one is not the kernel's.
 *
 * __global__ void scaleAddOld(int *out, int n)
 */

typedef unsigned int uint;
typedef float real;

// extern "C" __global__ void scaleAdd(int *out, int n)
extern "C" __global__ void scaleAdd(real *out, const real in[], uint n, real a)
{
    uint i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = a * in[i] + out[i];
}
