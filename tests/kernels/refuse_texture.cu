/* Out of the simulator's subset: a texture fetch through a texture object (passed as its 64-bit handle).
 * `kernel load` must refuse it on the simulator. (nvcc compiles it.) */

extern "C" __global__ void fetchTexture(unsigned long long tex, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        out[i] = tex1Dfetch<float>((cudaTextureObject_t)tex, i);
}
