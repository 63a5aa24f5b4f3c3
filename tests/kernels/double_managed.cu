/* Double precision on managed memory: a Horner polynomial from a local coefficient table (each step a
 * fused multiply-add in double), a correctly rounded division and sqrt. The host reads the result
 * in place, without a copy. */

extern "C" __global__ void polyDouble(const double *x, double *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    const double c[6] = {1.0, 1.0, 0.5, 1.0 / 6.0, 1.0 / 24.0, 1.0 / 120.0};
    double v = x[i] * 4.0 - 2.0;
    double p = c[5];
    for (int k = 4; k >= 0; --k)
        p = p * v + c[k];
    double q = 1.0 + v * v;
    y[i] = p / q + sqrt(v < 0.0 ? -v : v);
}
