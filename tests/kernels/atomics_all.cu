/* Every atomic on every type it is defined for, used so that the end result does not depend on the order
 * the threads get there: add/sub/min/max/and/or/xor commute; atomicInc/atomicDec apply the same step
 * n times; float and double additions are of whole numbers and halves (exact in any order); exchange
 * and compare-and-swap are used on a slot per thread or in a retry loop whose total is fixed. */

extern "C" __global__ void atomicsAll(const unsigned int *in, int *ci, unsigned int *cu, unsigned long long *cull,
                                      float *cf, double *cd, unsigned int *slots, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned int x = in[i];
    int sx = (int)x;

    atomicAdd(&ci[0], sx >> 8);
    atomicSub(&ci[1], (int)(x & 0xffff));
    atomicMin(&ci[2], sx);
    atomicMax(&ci[3], sx);
    atomicAnd(&ci[4], sx | 0x10000);
    atomicOr(&ci[5], (int)(x & 0x00ff00ff));
    atomicXor(&ci[6], sx);
    int seen, cur = ci[7];
    do {
        seen = cur;
        cur = atomicCAS(&ci[7], seen, seen - 2);
    } while (cur != seen);

    atomicAdd(&cu[0], x);
    atomicSub(&cu[1], x & 0xff);
    atomicMin(&cu[2], x);
    atomicMax(&cu[3], x);
    atomicInc(&cu[4], 100u);
    atomicDec(&cu[5], 50u);
    atomicAnd(&cu[6], x | 0x80000000u);
    atomicOr(&cu[7], x & 0x0f0f0f0fu);
    atomicXor(&cu[8], x);
    unsigned int useen, ucur = cu[9];
    do {
        useen = ucur;
        ucur = atomicCAS(&cu[9], useen, useen + 3u);
    } while (ucur != useen);

    unsigned long long wide = (unsigned long long)x * x;
    atomicAdd(&cull[0], wide);
    atomicMin(&cull[1], wide);
    atomicMax(&cull[2], (unsigned long long)x << 20);
    atomicAnd(&cull[3], ~(1ull << (x & 63)));
    atomicOr(&cull[4], 1ull << (x & 63));
    atomicXor(&cull[5], (unsigned long long)x * 0x9e3779b97f4a7c15ull);
    unsigned long long lseen, lcur = cull[6];
    do {
        lseen = lcur;
        lcur = atomicCAS(&cull[6], lseen, lseen + wide);
    } while (lcur != lseen);

    atomicAdd(&cf[0], (float)(x & 0xff));
    atomicAdd(&cd[0], (double)(x & 0xffff) * 0.5);

    unsigned int old = atomicExch(&slots[2 * i], x);
    slots[2 * i + 1] = old;
}
