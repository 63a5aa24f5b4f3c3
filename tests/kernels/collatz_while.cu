/* A data-dependent `while` per thread: the Collatz walk from start+1 down to 1. Each thread loops a
 * different number of times; a warp's threads diverge and reconverge. */

extern "C" __global__ void collatzSteps(const unsigned short *start, unsigned int *steps,
                                        unsigned long long *peak, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned long long x = start[i] + 1ull;
    unsigned long long top = x;
    unsigned int s = 0;
    while (x != 1) {
        x = (x & 1) ? 3 * x + 1 : x / 2;
        if (x > top)
            top = x;
        ++s;
    }
    steps[i] = s;
    peak[i] = top;
}
