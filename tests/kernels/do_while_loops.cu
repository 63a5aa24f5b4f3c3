/* Loops whose length the data decides: Euclid's gcd as a do/while that counts its iterations, and the
 * first prime above a number with `continue` (skip even candidates) and `break` (a divisor found; a
 * prime found) in nested loops. */

extern "C" __global__ void gcdDoWhile(const unsigned short *a, const unsigned short *b, unsigned int *g,
                                      int *iters, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned int x = a[i], y = b[i];
    int k = 0;
    if (y == 0) {
        g[i] = x;
        iters[i] = 0;
        return;
    }
    do {
        unsigned int t = x % y;
        x = y;
        y = t;
        ++k;
    } while (y != 0);
    g[i] = x;
    iters[i] = k;
}

extern "C" __global__ void nextPrime(const unsigned short *a, unsigned int *p, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned int c = a[i];
    for (;;) {
        ++c;
        if (c < 2)
            continue;
        if (c % 2 == 0 && c != 2)
            continue;
        bool prime = true;
        for (unsigned int d = 3; d * d <= c; d += 2) {
            if (c % d == 0) {
                prime = false;
                break;
            }
        }
        if (prime)
            break;
    }
    p[i] = c;
}
