/* A float atomicMax built from atomicCAS on the float's bits (the programming guide's pattern): retry
 * until the compare-and-swap sees the value it read, or the stored value is already larger. Each
 * thread first takes the max of its grid-stride elements; max does not depend on the order. */

__device__ float atomicMaxFloat(float *addr, float value)
{
    int *p = (int *)addr;
    int old = *p, assumed;
    do {
        assumed = old;
        if (__int_as_float(assumed) >= value)
            break;
        old = atomicCAS(p, assumed, __float_as_int(value));
    } while (assumed != old);
    return __int_as_float(old);
}

extern "C" __global__ void maxOfArray(const float *in, float *result, int n)
{
    float m = -1.0e30f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        m = fmaxf(m, in[i]);
    atomicMaxFloat(result, m);
}
