/* The 1-D stencil of NVIDIA's "CUDA C/C++ Basics": each block stages its elements plus RADIUS halo
 * elements on each side in shared memory, then every thread sums its 2*RADIUS+1 neighbours. Outside
 * the array counts as zero. */

#define RADIUS 3
#define BLOCK_SIZE 128

extern "C" __global__ void stencil1d(const short *in, int *out, int n)
{
    __shared__ int temp[BLOCK_SIZE + 2 * RADIUS];
    int gindex = blockIdx.x * blockDim.x + threadIdx.x;
    int lindex = threadIdx.x + RADIUS;

    temp[lindex] = gindex < n ? in[gindex] : 0;
    if (threadIdx.x < RADIUS) {
        temp[lindex - RADIUS] = gindex - RADIUS >= 0 ? in[gindex - RADIUS] : 0;
        temp[lindex + BLOCK_SIZE] = gindex + BLOCK_SIZE < n ? in[gindex + BLOCK_SIZE] : 0;
    }
    __syncthreads();

    if (gindex >= n)
        return;
    int result = 0;
    for (int offset = -RADIUS; offset <= RADIUS; offset++)
        result += temp[lindex + offset];
    out[gindex] = result;
}
