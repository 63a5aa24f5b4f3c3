/* An inclusive prefix sum within each warp with __shfl_up_sync (Hillis-Steele over the lanes), and the
 * warp's total broadcast from its last lane. Unsigned, so sums wrap as C defines. */

extern "C" __global__ void warpInclusiveScan(const unsigned int *in, unsigned int *out, unsigned int *warpTotal)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x % warpSize;
    unsigned int v = in[i];
    for (int offset = 1; offset < warpSize; offset <<= 1) {
        unsigned int t = __shfl_up_sync(0xffffffffu, v, offset);
        if (lane >= offset)
            v += t;
    }
    out[i] = v;
    unsigned int total = __shfl_sync(0xffffffffu, v, warpSize - 1);
    if (lane == 0)
        warpTotal[i / warpSize] = total;
}
