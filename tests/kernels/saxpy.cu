/* SAXPY, y = a*x + y: the first kernel of every course. nvcc contracts a*x + y into one fused
 * multiply-add (one rounding), so the simulator must too. */

extern "C" __global__ void saxpy(int n, float a, const float *x, float *y)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = a * x[i] + y[i];
}
