/* One Jacobi step of a 5-point stencil on a 2-D grid: each 16x8 block stages its tile and a one-cell
 * halo on every side in a 2-D shared array. Border cells keep their value. The float sum runs in
 * source order and is scaled once (no product is added to anything, so nothing is contracted). */

#define BX 16
#define BY 8

extern "C" __global__ void jacobi5(const float *in, float *out, int w, int h)
{
    __shared__ float s[BY + 2][BX + 2];
    int x = blockIdx.x * BX + threadIdx.x;
    int y = blockIdx.y * BY + threadIdx.y;
    int tx = threadIdx.x + 1, ty = threadIdx.y + 1;
    bool inside = x < w && y < h;

    s[ty][tx] = inside ? in[y * w + x] : 0.0f;
    if (threadIdx.x == 0)
        s[ty][0] = (x > 0 && y < h) ? in[y * w + x - 1] : 0.0f;
    if (threadIdx.x == BX - 1)
        s[ty][BX + 1] = (x + 1 < w && y < h) ? in[y * w + x + 1] : 0.0f;
    if (threadIdx.y == 0)
        s[0][tx] = (y > 0 && x < w) ? in[(y - 1) * w + x] : 0.0f;
    if (threadIdx.y == BY - 1)
        s[BY + 1][tx] = (y + 1 < h && x < w) ? in[(y + 1) * w + x] : 0.0f;
    __syncthreads();

    if (!inside)
        return;
    if (x == 0 || y == 0 || x == w - 1 || y == h - 1) {
        out[y * w + x] = s[ty][tx];
        return;
    }
    out[y * w + x] = 0.2f * (s[ty][tx] + s[ty - 1][tx] + s[ty + 1][tx] + s[ty][tx - 1] + s[ty][tx + 1]);
}
