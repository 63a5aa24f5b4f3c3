/* Fixed-size local arrays: a 3x3 median filter that gathers its window into int win[9] (edges clamped
 * with min/max) and insertion-sorts it; and a 3x3 determinant from a local 2-D array filled by walking
 * a pointer through the input, with 64-bit products. */

extern "C" __global__ void median3x3(const int *in, int *out, int w, int h)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h)
        return;
    int win[9];
    int k = 0;
    for (int dy = -1; dy <= 1; ++dy)
        for (int dx = -1; dx <= 1; ++dx) {
            int xx = min(max(x + dx, 0), w - 1);
            int yy = min(max(y + dy, 0), h - 1);
            win[k++] = in[yy * w + xx];
        }
    for (int a = 1; a < 9; ++a) {
        int v = win[a];
        int b = a - 1;
        while (b >= 0 && win[b] > v) {
            win[b + 1] = win[b];
            --b;
        }
        win[b + 1] = v;
    }
    out[y * w + x] = win[4];
}

extern "C" __global__ void det3x3(const short *m, long long *det, int count)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count)
        return;
    int a[3][3];
    const short *p = m + 9 * i;
    for (int r = 0; r < 3; ++r)
        for (int c = 0; c < 3; ++c)
            a[r][c] = *p++;
    long long d = 0;
    for (int c = 0; c < 3; ++c) {
        long long minor = (long long)a[1][(c + 1) % 3] * a[2][(c + 2) % 3]
                        - (long long)a[1][(c + 2) % 3] * a[2][(c + 1) % 3];
        d += a[0][c] * minor;
    }
    det[i] = d;
}
