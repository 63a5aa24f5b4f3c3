/* Unsigned-char image kernels on 3-D grids. brightenContrast works on planar RGB frames, one grid
 * z-slice per colour plane (frame*3 + channel); rgbToGray reads interleaved RGB through a pointer and
 * uses 3-D blocks whose z covers two frames. Bytes are promoted to int, then saturated or shifted back. */

extern "C" __global__ void brightenContrast(const unsigned char *src, unsigned char *dst, int w, int h,
                                            int gain256, int bias)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int plane = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= w || y >= h)
        return;
    int idx = (plane * h + y) * w + x;
    int v = ((src[idx] * gain256) >> 8) + bias;
    dst[idx] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
}

extern "C" __global__ void rgbToGray(const unsigned char *rgb, unsigned char *gray, int w, int h, int frames)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int f = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= w || y >= h || f >= frames)
        return;
    int idx = (f * h + y) * w + x;
    const unsigned char *p = rgb + 3 * idx;
    unsigned char g = (unsigned char)((77 * p[0] + 150 * p[1] + 29 * p[2] + 128) >> 8);
    gray[idx] = g > 200 ? (unsigned char)~g : g;
}
