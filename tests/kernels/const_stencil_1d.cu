/* A 1-D stencil whose 2*RADIUS+1 weights live in constant memory, written by the host before the launch
 * (cudaMemcpyToSymbol). Every thread of a warp reads the same weight at the same time: a broadcast. Outside
 * the array counts as zero; the sum is a chain of fused multiply-adds. */

#define RADIUS 4

__constant__ float weights[2 * RADIUS + 1];

extern "C" __global__ void constStencil(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float sum = 0.0f;
    for (int k = -RADIUS; k <= RADIUS; k++) {
        int j = i + k;
        float x = (j >= 0 && j < n) ? in[j] : 0.0f;
        sum += weights[k + RADIUS] * x;
    }
    out[i] = sum;
}
