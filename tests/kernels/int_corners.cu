/* C integer corner cases, sixteen results per element: division truncates toward zero and % takes the
 * dividend's sign; >> is arithmetic on int and logical on unsigned; unsigned arithmetic wraps; an int
 * compared with an unsigned is converted to unsigned; narrowing casts keep the low bits; the high
 * word of a 64-bit product; float <-> int conversions truncate. Nothing here is undefined behaviour:
 * y is odd (never 0) and never -1, and signed results that could overflow are computed unsigned. */

#define K 16

extern "C" __global__ void intCorners(const int *a, const int *b, int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int x = a[i];
    int y = b[i] | 1;
    if (y == -1)
        y = -3;
    int *o = out + K * i;

    o[0] = x / y;
    o[1] = x % y;
    o[2] = x >> 5;
    o[3] = (int)((unsigned int)x >> 5);
    o[4] = (int)((unsigned int)x * 2654435761u);
    o[5] = (int)((unsigned int)x + (unsigned int)y);
    o[6] = x < (unsigned int)y ? 1 : 0;
    o[7] = (signed char)x;
    o[8] = (unsigned short)x;
    o[9] = (int)(((long long)x * y) >> 32);
    o[10] = (int)((float)x * 0.5f);
    o[11] = (y < 0 ? -y : y) % 10;
    o[12] = min(x, y);
    o[13] = max((unsigned int)x, (unsigned int)y);
    o[14] = (int)((unsigned int)x % 7u);
    o[15] = (x & 0xff) - (y & 0xff) < 0 ? -1 : (x ^ y) >> 28;
}
