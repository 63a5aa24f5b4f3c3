/* A tiled transpose whose block is a cooperative group: a 32 x 32 tile (padded to 33 columns, so the column
 * reads fall in different banks) is staged in shared memory by 32 x 8 threads, and the thread block's sync()
 * stands where __syncthreads() would. Any width and height: the edges are guarded. */

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

#define TILE_DIM 32
#define ROWS 8

extern "C" __global__ void cgTranspose(float *out, const float *in, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];
    cg::thread_block block = cg::this_thread_block();
    dim3 t = block.thread_index();
    dim3 b = block.group_index();
    int x = b.x * TILE_DIM + t.x;
    int y = b.y * TILE_DIM + t.y;
    for (int j = 0; j < TILE_DIM; j += ROWS)
        if (x < width && y + j < height)
            tile[t.y + j][t.x] = in[(y + j) * width + x];
    block.sync();
    x = b.y * TILE_DIM + t.x;
    y = b.x * TILE_DIM + t.y;
    for (int j = 0; j < TILE_DIM; j += ROWS)
        if (x < height && y + j < width)
            out[(y + j) * height + x] = tile[t.x][t.y + j];
}
