/* A Julia set with a complex-number struct: a constructor with an initializer list, operators * and + as
 * member functions taking a const reference, a method for |z|^2. Each pixel records the step at which
 * z = z*z + c escapes (|z|^2 > 1000), or 200 if it never does. nvcc unrolls this loop four times and reuses r*r
 * and i*i, computed for |z|^2, in the next step's z*z without fusing them, which the simulator does not model:
 * on the H100 6 of the 1600 pixels escape a step apart from the simulator's (and the reference's). */

#define DIM 40

struct cuComplex {
    float r, i;
    __device__ cuComplex(float a, float b) : r(a), i(b) {}
    __device__ float magnitude2(void) { return r * r + i * i; }
    __device__ cuComplex operator*(const cuComplex &a) { return cuComplex(r * a.r - i * a.i, i * a.r + r * a.i); }
    __device__ cuComplex operator+(const cuComplex &a) { return cuComplex(r + a.r, i + a.i); }
};

__device__ int julia(int x, int y)
{
    const float scale = 1.5f;
    float jx = scale * (float)(DIM / 2 - x) / (DIM / 2);
    float jy = scale * (float)(DIM / 2 - y) / (DIM / 2);
    cuComplex c(-0.8f, 0.156f);
    cuComplex a(jx, jy);
    for (int k = 0; k < 200; k++) {
        a = a * a + c;
        if (a.magnitude2() > 1000)
            return k;
    }
    return 200;
}

extern "C" __global__ void juliaKernel(int *steps)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < DIM && y < DIM)
        steps[x + y * DIM] = julia(x, y);
}
