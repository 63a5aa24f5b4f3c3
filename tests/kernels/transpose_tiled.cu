/* Tiled matrix transpose through a padded 2-D shared tile (TILE_DIM x TILE_DIM+1: the extra column keeps
 * the column reads free of bank conflicts). Blocks of 32x8 threads each move a 32x32 tile; the
 * bounds checks allow any width and height. */

#define TILE_DIM 32
#define BLOCK_ROWS 8

extern "C" __global__ void transposeTiled(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + 1];

    int x = blockIdx.x * TILE_DIM + threadIdx.x;
    int y = blockIdx.y * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < width && y + j < height)
            tile[threadIdx.y + j][threadIdx.x] = idata[(y + j) * width + x];

    __syncthreads();

    x = blockIdx.y * TILE_DIM + threadIdx.x; /* transposed block offset */
    y = blockIdx.x * TILE_DIM + threadIdx.y;
    for (int j = 0; j < TILE_DIM; j += BLOCK_ROWS)
        if (x < height && y + j < width)
            odata[(y + j) * height + x] = tile[threadIdx.x][threadIdx.y + j];
}
