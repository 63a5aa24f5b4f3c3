/* Vector add with a grid-stride loop: the grid has fewer threads than there are elements, so each
 * thread strides by the whole grid (blockDim.x * gridDim.x) until it runs off the end. */

extern "C" __global__ void vecAddGridStride(const float *a, const float *b, float *c, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        c[i] = a[i] + b[i];
}
