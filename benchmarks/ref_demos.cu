// The timed loops of the shipped demos with an `elapsed` (cudashell/demos/*.cush), written in plain CUDA C: the
// same buffers, sizes, kernels (the built-ins' bodies and launch shapes), streams and event placement. Each line
// printed is "<demo> elapsed <start> <end> <ms>", the figure the demo prints.
// benchmarks/sim_fidelity.py compiles it and runs each demo five times (each a fresh process, as each demo is) in
// the same run as the demos, and prints the shell's figure over the median of these.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorName(e_)); exit(1); } } while (0)

// the built-ins' thread number and bodies (cudashell/kernels.py, BUILTIN_SOURCE)
#define GID ((((long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x) \
             * (blockDim.x * blockDim.y * blockDim.z) + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x)
__global__ void k_sum(const float *A, const float *B, float *C, int n) { long long i = GID; if (i < n) C[i] = A[i] + B[i]; }
__global__ void k_increment(float *A, int n) { long long i = GID; if (i < n) A[i] += 1.0f; }

static const int BLOCK = 256;  // `launch`'s default block; the grid covers the elements
static int grid(long long n) { return (int)((n + BLOCK - 1) / BLOCK); }

static void figure(const char *name, float ms) { printf("%s %.4f\n", name, ms); }

static float between(cudaEvent_t a, cudaEvent_t b) {
    float ms;
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaEventElapsedTime(&ms, a, b));
    return ms;
}

static void pinned_vs_pageable() {
    const size_t bytes = 400000;  // 100,000 ints
    int *pageable = (int *)malloc(bytes), *pinned, *dev;
    CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
    CHECK(cudaMalloc(&dev, bytes));
    for (int i = 0; i < 100000; i++) pageable[i] = pinned[i] = i;
    cudaEvent_t e[4];
    for (auto &x : e) CHECK(cudaEventCreate(&x));
    CHECK(cudaEventRecord(e[0], 0));
    for (int r = 0; r < 100; r++) {
        CHECK(cudaMemcpyAsync(dev, pageable, bytes, cudaMemcpyHostToDevice, 0));
        CHECK(cudaMemcpyAsync(pageable, dev, bytes, cudaMemcpyDeviceToHost, 0));
    }
    CHECK(cudaEventRecord(e[1], 0));
    CHECK(cudaEventRecord(e[2], 0));
    for (int r = 0; r < 100; r++) {
        CHECK(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, 0));
        CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, 0));
    }
    CHECK(cudaEventRecord(e[3], 0));
    figure("pinned-vs-pageable elapsed pg0 pg1", between(e[0], e[1]));
    figure("pinned-vs-pageable elapsed pn0 pn1", between(e[2], e[3]));
    for (auto &x : e) CHECK(cudaEventDestroy(x));
    free(pageable); CHECK(cudaFreeHost(pinned)); CHECK(cudaFree(dev));
}

static void memory_api() {
    const size_t bytes = 16 << 20;
    float *pageable = (float *)malloc(bytes), *pinned, *dev;
    CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
    CHECK(cudaMalloc(&dev, bytes));
    for (size_t i = 0; i < bytes / 4; i++) pageable[i] = pinned[i] = (float)i;
    CHECK(cudaMemset(dev, 0, bytes));
    cudaEvent_t e[4];
    for (auto &x : e) CHECK(cudaEventCreate(&x));
    CHECK(cudaEventRecord(e[0], 0));
    CHECK(cudaMemcpy(dev, pageable, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(pageable, dev, bytes, cudaMemcpyDeviceToHost));
    CHECK(cudaEventRecord(e[1], 0));
    CHECK(cudaEventRecord(e[2], 0));  // the demo issues these while the stream is held: back to back, as here
    CHECK(cudaMemcpyAsync(dev, pinned, bytes, cudaMemcpyHostToDevice, 0));
    CHECK(cudaMemcpyAsync(pinned, dev, bytes, cudaMemcpyDeviceToHost, 0));
    CHECK(cudaEventRecord(e[3], 0));
    figure("memory-api elapsed pg0 pg1", between(e[0], e[1]));
    figure("memory-api elapsed pn0 pn1", between(e[2], e[3]));
    for (auto &x : e) CHECK(cudaEventDestroy(x));
    free(pageable); CHECK(cudaFreeHost(pinned)); CHECK(cudaFree(dev));
}

static void zero_copy() {
    const size_t bytes = 4 << 20;
    const int n = (int)(bytes / 4);
    float *za, *zb, *da, *db, *dc;
    CHECK(cudaHostAlloc(&za, bytes, cudaHostAllocMapped));
    CHECK(cudaHostAlloc(&zb, bytes, cudaHostAllocMapped));
    CHECK(cudaMalloc(&da, bytes)); CHECK(cudaMalloc(&db, bytes)); CHECK(cudaMalloc(&dc, bytes));
    for (int i = 0; i < n; i++) { za[i] = 1; zb[i] = 2; }
    CHECK(cudaMemcpy(da, za, bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(db, zb, bytes, cudaMemcpyHostToDevice));
    k_sum<<<grid(n), BLOCK>>>(da, db, dc, n);  // the demo's untimed first launch
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t e[4];
    for (auto &x : e) CHECK(cudaEventCreate(&x));
    CHECK(cudaEventRecord(e[0], 0));
    k_sum<<<grid(n), BLOCK>>>(za, zb, dc, n);  // under UVA the host pointer is the device's
    CHECK(cudaEventRecord(e[1], 0));
    CHECK(cudaEventRecord(e[2], 0));
    k_sum<<<grid(n), BLOCK>>>(da, db, dc, n);
    CHECK(cudaEventRecord(e[3], 0));
    CHECK(cudaDeviceSynchronize());
    figure("zero-copy elapsed zc0 zc1", between(e[0], e[1]));
    figure("zero-copy elapsed dv0 dv1", between(e[2], e[3]));
    for (auto &x : e) CHECK(cudaEventDestroy(x));
    CHECK(cudaFreeHost(za)); CHECK(cudaFreeHost(zb)); CHECK(cudaFree(da)); CHECK(cudaFree(db)); CHECK(cudaFree(dc));
}

static void chunk(float *h, float *d, size_t half, int i, cudaStream_t s, int step) {
    // one step of chunk i on stream s: 0 copy in, 1 and 2 the kernels, 3 copy out
    float *hp = h + i * (half / 4), *dp = d + i * (half / 4);
    const int n = (int)(half / 4);
    if (step == 0) CHECK(cudaMemcpyAsync(dp, hp, half, cudaMemcpyHostToDevice, s));
    else if (step == 3) CHECK(cudaMemcpyAsync(hp, dp, half, cudaMemcpyDeviceToHost, s));
    else k_increment<<<grid(n), BLOCK, 0, s>>>(dp, n);
}

static void streams() {
    const size_t bytes = 64 << 20, half = bytes / 2;
    float *h, *d;
    CHECK(cudaHostAlloc(&h, bytes, cudaHostAllocDefault));
    CHECK(cudaMalloc(&d, bytes));
    memset(h, 0, bytes);
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreate(&s1)); CHECK(cudaStreamCreate(&s2));
    k_increment<<<grid(half / 4), BLOCK>>>(d, (int)(half / 4));  // the demo's untimed first launch
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    const char *names[3] = {"streams elapsed one0 one1", "streams elapsed naive0 naive1", "streams elapsed bf0 bf1"};
    for (int order = 0; order < 3; order++) {
        CHECK(cudaEventRecord(a, 0));
        if (order < 2) {  // depth-first: chunk 0 whole, then chunk 1 (on s1 again, or on s2)
            for (int i = 0; i < 2; i++)
                for (int step = 0; step < 4; step++) chunk(h, d, half, i, i && order ? s2 : s1, step);
        } else {  // breadth-first: both copies in, both kernels, both kernels, both copies out
            for (int step = 0; step < 4; step++)
                for (int i = 0; i < 2; i++) chunk(h, d, half, i, i ? s2 : s1, step);
        }
        CHECK(cudaEventRecord(b, 0));
        figure(names[order], between(a, b));
        CHECK(cudaDeviceSynchronize());
    }
    CHECK(cudaEventDestroy(a)); CHECK(cudaEventDestroy(b));
    CHECK(cudaStreamDestroy(s1)); CHECK(cudaStreamDestroy(s2));
    CHECK(cudaFreeHost(h)); CHECK(cudaFree(d));
}

int main(int argc, char **argv) {
    // the demo named (all of them, in order, without one): a process of its own for each, as `demo` gets (the
    // driver's first pageable copy in a process sets up its staging, which a demo run after another would skip)
    const char *only = argc > 1 ? argv[1] : nullptr;
    CHECK(cudaFree(0));  // the context, as the shell has one before its first command
    if (!only || !strcmp(only, "pinned-vs-pageable")) pinned_vs_pageable();
    if (!only || !strcmp(only, "memory-api")) memory_api();
    if (!only || !strcmp(only, "zero-copy")) zero_copy();
    if (!only || !strcmp(only, "streams")) streams();
    return 0;
}
