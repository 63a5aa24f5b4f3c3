/* Where nvcc's back end fuses past one multiply-add: device functions are inlined (unless __noinline__), and an
 * fma whose addend is still a product takes the next sum or difference into a second fma. On float2 points:
 *   diff   = norm2(a) - norm2(b)      -> fma(ax, ax, fma(ay, ay, -fma(bx, bx, by*by)))
 *   chain  = ax*bx + ay*by + c        -> fma(ax, bx, fma(ay, by, c))
 *   rsub   = c - norm2(a)             -> fma(-ax, ax, fma(-ay, ay, c))
 *   acc    = (c += norm2(a)) -= ax*by -> fma(-ax, by, fma(ax, ax, fma(ay, ay, c)))
 *   apart  = norm2n(a) - norm2n(b)    -> the two calls' results, each one fma, subtracted and rounded
 *   dist   = c + dist2(a, b)          -> fma(dx, dx, fma(dy, dy, c)), dx and dy rounded differences */

__device__ float norm2(float2 p) { return p.x * p.x + p.y * p.y; }

__device__ float dist2(float2 p, float2 q)
{
    float dx = p.x - q.x;
    float dy = p.y - q.y;
    return dx * dx + dy * dy;
}

__device__ __noinline__ float norm2n(float2 p) { return p.x * p.x + p.y * p.y; }

extern "C" __global__ void fmaInlined(const float2 *r, const float2 *p, const float *c, float *diff, float *chain,
                                      float *rsub, float *acc, float *apart, float *dist, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float2 a = r[i];
    float2 b = p[i];
    diff[i] = norm2(a) - norm2(b);
    chain[i] = a.x * b.x + a.y * b.y + c[i];
    rsub[i] = c[i] - norm2(a);
    float s = c[i];
    s += norm2(a);
    s -= a.x * b.y;
    acc[i] = s;
    apart[i] = norm2n(a) - norm2n(b);
    dist[i] = c[i] + dist2(a, b);
}
