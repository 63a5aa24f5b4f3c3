/* Vector types: float4 and int4 copies (one 16-byte load and store a thread), make_float4 and member access,
 * and a float4 load from an address that is not 16-aligned — CUDA_ERROR_MISALIGNED_ADDRESS at the next sync,
 * as on the GPU. */

extern "C" __global__ void copyFloat4(const float4 *in, float4 *out, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4)
        out[i] = in[i];
}

extern "C" __global__ void shuffleFloat4(const float4 *in, float4 *out, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4)
        return;
    float4 v = in[i];
    out[i] = make_float4(v.w, v.x + v.y, v.z * 2.0f, -v.x);
}

extern "C" __global__ void addInt4(const int4 *a, const int4 *b, int4 *out, int n4)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n4)
        return;
    int4 x = a[i], y = b[i];
    out[i] = make_int4(x.x + y.x, x.y - y.y, x.z ^ y.z, x.w * 3);
}

extern "C" __global__ void loadFloat4At(const float *base, float *out, int offset)
{
    float4 v = *(const float4 *)(base + offset);
    out[threadIdx.x] = v.x + v.y + v.z + v.w;
}
