/* printf from device code: the first lane of every warp prints a line, and thread 0 prints one with
 * several conversions (a float argument is promoted to double, as in C). Lines from different warps
 * may come in any order. */

extern "C" __global__ void helloWarps(const int *data, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (threadIdx.x % warpSize == 0)
        printf("block %d warp %d value %d\n", blockIdx.x, threadIdx.x / warpSize, data[i]);
    if (i == 0)
        printf("n=%u hex=%x half=%.3f %s\n", (unsigned int)n, 255u, 1.5f, "done");
}
