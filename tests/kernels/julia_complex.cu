/* A Julia set with a complex-number struct: a constructor, const methods, and + and * as member operators.
 * Each pixel iterates z = z*z + c from its own starting point and records the step at which |z|^2 passed 4
 * (0 for points that stay within MAX_STEPS). */

#define MAX_STEPS 100

struct Complex {
    float re, im;
    __device__ Complex(float r, float i) : re(r), im(i) {}
    __device__ float norm2() const { return re * re + im * im; }
    __device__ Complex operator*(Complex b) const { return Complex(re * b.re - im * b.im, re * b.im + im * b.re); }
    __device__ Complex operator+(Complex b) const { return Complex(re + b.re, im + b.im); }
};

__device__ int escapeStep(float x, float y, Complex c)
{
    Complex z(x, y);
    for (int step = 1; step <= MAX_STEPS; step++) {
        z = z * z + c;
        if (z.norm2() > 4.0f)
            return step;
    }
    return 0;
}

extern "C" __global__ void julia(unsigned char *steps, int w, int h, float cre, float cim)
{
    int px = blockIdx.x * blockDim.x + threadIdx.x;
    int py = blockIdx.y * blockDim.y + threadIdx.y;
    if (px >= w || py >= h)
        return;
    float x = (float)(px - w / 2) / (float)(w / 2) * 1.5f;
    float y = (float)(py - h / 2) / (float)(h / 2);
    steps[py * w + px] = (unsigned char)escapeStep(x, y, Complex(cre, cim));
}
