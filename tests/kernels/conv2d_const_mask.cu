/* A 2-D convolution whose MASK x MASK mask is a __constant__ array sized by a file-scope constant; the image
 * is row-major, width w and height h, with zeros outside it. 2-D grid of 2-D blocks. */

const int MASK = 5;
const int HALF = MASK / 2;

__constant__ float mask[MASK][MASK];

extern "C" __global__ void convolve2d(const float *image, float *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    float sum = 0.0f;
    for (int dy = 0; dy < MASK; dy++) {
        int row = y + dy - HALF;
        for (int dx = 0; dx < MASK; dx++) {
            int col = x + dx - HALF;
            if (row >= 0 && row < h && col >= 0 && col < w)
                sum += mask[dy][dx] * image[row * w + col];
        }
    }
    out[y * w + x] = sum;
}
