/* The math library in single precision. `exact` holds what IEEE rounding fixes to one answer (sqrtf,
 * division, fabsf, fminf/fmaxf, floorf/ceilf, min/max on ints, __fmaf_rn); `approx` holds functions CUDA
 * documents to within a few ulps (expf, logf, sinf, cosf, powf, rsqrtf) — a GPU and the simulator
 * must still agree bit for bit. */

extern "C" __global__ void mathFuncs(const float *in, float *exact, float *approx, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float x = in[i] + 0.25f;
    float y = in[(i + 1) % n] - 0.5f;
    float *e = exact + 8 * i;
    float *a = approx + 6 * i;

    e[0] = sqrtf(x);
    e[1] = x / (y + 2.0f);
    e[2] = fabsf(y);
    e[3] = fminf(x, y);
    e[4] = fmaxf(x, y);
    e[5] = floorf(y * 8.0f);
    e[6] = ceilf(y * 8.0f) + (float)min(i, 7) - (float)max(i, 500);
    e[7] = __fmaf_rn(x, y, 1.0f);

    a[0] = expf(y);
    a[1] = logf(x);
    a[2] = sinf(y * 3.0f);
    a[3] = cosf(y * 3.0f);
    a[4] = powf(x, 1.5f);
    a[5] = rsqrtf(x);
}
