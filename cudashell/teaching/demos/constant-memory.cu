// demo constant-memory: one 1-D stencil, out[i] = sum over k of c[k] * in[i + k], with its 33 coefficients read
// four ways. Only where the coefficients live and which lane reads which one change: the reads of `in` and the
// arithmetic are the same in every kernel.
#define TAPS 33   // more taps than a warp has lanes: (lane + k) % TAPS gives each of the 32 lanes its own

__constant__ float coef[TAPS];  // filled from the host: memcpy h2d … m.coef (cudaMemcpyToSymbol)

// Every lane of a warp reads coef[k] at the same k: one address a request, which the constant cache broadcasts.
__global__ void stencil_constant(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < TAPS; ++k)
            sum += coef[k] * in[i + k];
        out[i] = sum;
    }
}

// Each lane reads another coefficient: 32 distinct addresses a request, which the constant cache serves one by one.
// (Rotating the coefficients per lane makes another stencil unless they are all equal, as the demo's are: it is
// here for what the index costs.)
__global__ void stencil_constant_divergent(const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < TAPS; ++k)
            sum += coef[(threadIdx.x + k) % TAPS] * in[i + k];
        out[i] = sum;
    }
}

// The coefficients in device memory, passed as a pointer: loaded like `in`, through L1.
__global__ void stencil_global(const float *c, const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < TAPS; ++k)
            sum += c[k] * in[i + k];
        out[i] = sum;
    }
}

// Device memory with the divergent index: the 32 lanes' coefficients lie in 132 bytes, a few sectors.
__global__ void stencil_global_divergent(const float *c, const float *in, float *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float sum = 0.0f;
        for (int k = 0; k < TAPS; ++k)
            sum += c[(threadIdx.x + k) % TAPS] * in[i + k];
        out[i] = sum;
    }
}
