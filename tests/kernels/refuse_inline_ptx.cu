/* Out of the simulator's subset: inline PTX. `kernel load` must refuse it on the simulator. (nvcc
 * compiles it.) */

extern "C" __global__ void laneIds(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int lane;
    asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
    if (i < n)
        out[i] = lane;
}
