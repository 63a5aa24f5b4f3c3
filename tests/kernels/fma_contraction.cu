/* Where fused multiply-add changes the answer: nvcc compiles a*b - c as one fma (a single rounding), so
 * `fused` equals the explicit __fmaf_rn and not the twice-rounded (a*b rounded) - c of plain C on a CPU. */

extern "C" __global__ void mulSub(const float *a, const float *b, const float *c, float *fused, float *explicitFma,
                                  int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    fused[i] = a[i] * b[i] - c[i];
    explicitFma[i] = __fmaf_rn(a[i], b[i], -c[i]);
}
