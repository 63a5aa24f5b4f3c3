/* How nvcc contracts float expressions (measured on the H100): a product meets the sum or difference it is an
 * operand of (the left one first), an fma is never fused again, and device functions are inlined (unless
 * __noinline__), so a product a function returns meets the caller's sum. On float2 points:
 *   diff   = norm2(a) - norm2(b)      -> fma(ax, ax, ay*ay) - fma(bx, bx, by*by)
 *   chain  = ax*bx + ay*by + c        -> fma(ax, bx, ay*by) + c
 *   rsub   = c - norm2(a)             -> c - fma(ax, ax, ay*ay)
 *   acc    = (c += norm2(a)) -= ax*by -> fma(-ax, by, c + fma(ax, ax, ay*ay))
 *   apart  = norm2n(a) - norm2n(b)    -> the two calls' results, as diff
 *   dist   = c + dist2(a, b)          -> c + fma(dx, dx, dy*dy), dx and dy rounded differences
 *   sqc    = sq(ax) + c               -> fma(ax, ax, c): the inlined product meets the sum
 *   sqn    = sqn(ax) + c              -> ax*ax rounded, then + c: a __noinline__ call's result is a value */

__device__ float norm2(float2 p) { return p.x * p.x + p.y * p.y; }

__device__ float dist2(float2 p, float2 q)
{
    float dx = p.x - q.x;
    float dy = p.y - q.y;
    return dx * dx + dy * dy;
}

__device__ __noinline__ float norm2n(float2 p) { return p.x * p.x + p.y * p.y; }

__device__ float sq(float x) { return x * x; }

__device__ __noinline__ float sqn(float x) { return x * x; }

extern "C" __global__ void fmaInlined(const float2 *r, const float2 *p, const float *c, float *diff, float *chain,
                                      float *rsub, float *acc, float *apart, float *dist, float *sqc, float *sqnc,
                                      int n)
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
    sqc[i] = sq(a.x) + c[i];
    sqnc[i] = sqn(a.x) + c[i];
}
