/* char and short arithmetic: every operand is promoted to int before it is used, so sums of bytes do
 * not wrap until they are stored back in a narrow type; `char` is signed here, and a signed char equal
 * to -1 does not compare equal to an unsigned char holding 255. */

extern "C" __global__ void promotions(const unsigned char *u8, const signed char *s8, const unsigned short *u16,
                                      const short *s16, int *out, unsigned char *wrap8, short *wrap16, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    unsigned char a = u8[i];
    unsigned char b = u8[(i + 1) % n];
    signed char c = s8[i];
    unsigned short us = u16[i];
    short ss = s16[i];
    int *o = out + 10 * i;

    o[0] = a + b;
    o[1] = a - b;
    o[2] = (unsigned char)(a + b);
    o[3] = ~a;
    o[4] = c >> 2;
    o[5] = c * c * c;
    o[6] = (c == a);
    o[7] = ss * ss;
    o[8] = (us & 0x7fff) * (us & 0x7fff);
    o[9] = (short)(ss + us);
    wrap8[i] = a * 3 + c;
    wrap16[i] = us + ss * 2;
}
