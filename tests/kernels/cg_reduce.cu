/* Cooperative groups in a sum: each thread adds a grid-stride run of the input, each warp (a tile of 32)
 * combines its threads' sums with cg::reduce, warp 0 combines the warps' sums the same way: one partial sum
 * per block. And per tile of 16, inclusive and exclusive scans of unsigned values and of floats. */

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
#include <cooperative_groups/scan.h>

namespace cg = cooperative_groups;

extern "C" __global__ void cgReduceSum(const float *in, float *partial, int n)
{
    __shared__ float warpSums[32];
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    float v = 0.0f;
    for (int i = block.group_index().x * block.size() + block.thread_rank(); i < n; i += gridDim.x * block.size())
        v += in[i];
    v = cg::reduce(warp, v, cg::plus<float>());
    if (warp.thread_rank() == 0)
        warpSums[warp.meta_group_rank()] = v;
    block.sync();
    if (warp.meta_group_rank() == 0) {
        float w = warp.thread_rank() < warp.meta_group_size() ? warpSums[warp.thread_rank()] : 0.0f;
        w = cg::reduce(warp, w, cg::plus<float>());
        if (block.thread_rank() == 0)
            partial[block.group_index().x] = w;
    }
}

extern "C" __global__ void cgTileScans(const unsigned int *in, unsigned int *incl, unsigned int *excl,
                                       const float *f, float *fincl, int n)
{
    cg::thread_block_tile<16> tile = cg::tiled_partition<16>(cg::this_thread_block());
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int v = i < n ? in[i] : 0u;
    float x = i < n ? f[i] : 0.0f;
    unsigned int a = cg::inclusive_scan(tile, v);
    unsigned int b = cg::exclusive_scan(tile, v, cg::plus<unsigned int>());
    float c = cg::inclusive_scan(tile, x, cg::plus<float>());
    if (i < n) {
        incl[i] = a;
        excl[i] = b;
        fincl[i] = c;
    }
}
