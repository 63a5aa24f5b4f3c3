/* Every built-in coordinate on a 3-D grid of 3-D blocks: each thread writes threadIdx, blockIdx, its
 * warp within the block (the linear thread index over warpSize) and a digest of blockDim and gridDim
 * at the slot of its global linear index. */

extern "C" __global__ void whoAmI(int *out)
{
    int block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
    int perBlock = blockDim.x * blockDim.y * blockDim.z;
    int *o = out + 8 * (block * perBlock + thread);
    o[0] = threadIdx.x;
    o[1] = threadIdx.y;
    o[2] = threadIdx.z;
    o[3] = blockIdx.x;
    o[4] = blockIdx.y;
    o[5] = blockIdx.z;
    o[6] = thread / warpSize;
    o[7] = ((blockDim.x * 16 + blockDim.y) * 16 + blockDim.z) * 1000 + gridDim.x * 100 + gridDim.y * 10 + gridDim.z;
}
