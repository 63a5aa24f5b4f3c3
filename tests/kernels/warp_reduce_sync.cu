/* sm_80's warp reductions: __reduce_add/min/max_sync over int, __reduce_and/or/xor_sync over unsigned, for the
 * whole warp and for the lanes of a partial mask (the even lanes), each lane given its mask's result. */
extern "C" __global__ void warpReduce(const int *x, int *sums, int *mins, int *maxs, unsigned *bits, int *evens)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int v = x[i];
    unsigned u = (unsigned)v;
    sums[i] = __reduce_add_sync(0xffffffffu, v);
    mins[i] = __reduce_min_sync(0xffffffffu, v);
    maxs[i] = __reduce_max_sync(0xffffffffu, v);
    bits[3 * i] = __reduce_and_sync(0xffffffffu, u | 0x80000000u);
    bits[3 * i + 1] = __reduce_or_sync(0xffffffffu, u & 0xffu);
    bits[3 * i + 2] = __reduce_xor_sync(0xffffffffu, u);
    if (threadIdx.x % 2 == 0)
        evens[i] = __reduce_add_sync(0x55555555u, v);
    else
        evens[i] = -1;
}
