/* Module variables of other shapes: an initialised __constant__ struct the kernel reads (never written by the
 * host), and a `static` __device__ counter (internal to this file, still reachable as the module's symbol). */

struct Params {
    float scale;
    int offset;
};

__constant__ Params params = {2.5f, 7};
static __device__ int applied;

extern "C" __global__ void applyParams(const int *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    out[i] = (float)(in[i] + params.offset) * params.scale;
    atomicAdd(&applied, 1);
}
