/* A tiled transpose of a w x h float matrix (any size: edges are guarded) through a padded shared tile, the
 * block synchronised with cg::this_thread_block().sync(). Blocks of TILE x ROWS threads, each moving TILE/ROWS
 * elements. */

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define TILE 32
#define ROWS 8

extern "C" __global__ void transposeCG(float *out, const float *in, int w, int h)
{
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < w && y + j < h)
            tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * w + x];

    cg::this_thread_block().sync();

    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < h && y + j < w)
            out[(y + j) * h + x] = tile[threadIdx.x][threadIdx.y + j];
}
