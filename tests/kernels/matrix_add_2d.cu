/* Matrix add on a 2-D grid of 2-D blocks: x indexes columns, y rows; threads past the edge do nothing. */

extern "C" __global__ void matAdd2D(const float *A, const float *B, float *C, int width, int height)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (col < width && row < height) {
        int idx = row * width + col;
        C[idx] = A[idx] + B[idx];
    }
}
