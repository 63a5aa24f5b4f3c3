/* Warp votes and bit counts: __ballot_sync gathers a predicate from every lane into a mask,
 * __any_sync/__all_sync reduce it to one flag; __popc, __clz and __ffs count bits of each value
 * (including 0: __clz(0) is 32, __ffs(0) is 0). */

extern "C" __global__ void warpVote(const unsigned int *in, unsigned int *ballots, int *flags, int *bits,
                                    unsigned int threshold)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & (warpSize - 1);
    int warp = i / warpSize;
    unsigned int x = in[i];

    unsigned int b = __ballot_sync(0xffffffffu, x > threshold);
    int anyZero = __any_sync(0xffffffffu, x == 0) != 0;
    int allOdd = __all_sync(0xffffffffu, x & 1) != 0;
    if (lane == 0) {
        ballots[warp] = b;
        flags[3 * warp] = anyZero;
        flags[3 * warp + 1] = allOdd;
        flags[3 * warp + 2] = __popc(b);
    }
    bits[3 * i] = __popc(x);
    bits[3 * i + 1] = __clz(x);
    bits[3 * i + 2] = __ffs(x);
}
