/* Out of the simulator's subset: dynamic parallelism, a kernel launching a kernel. `kernel load` must
 * refuse it on the simulator. (nvcc compiles it with -rdc=true.) */

__global__ void child(int *out)
{
    out[threadIdx.x] = threadIdx.x;
}

extern "C" __global__ void parent(int *out)
{
    if (threadIdx.x == 0)
        child<<<1, 32>>>(out);
}
