// Plain-C reference for benchmarks/overlap.py: CHUNKS pinned chunks, each copied in, worked on by a
// kernel that spins for SPIN_US on every SM, and copied out, spread over S streams (chunk c on stream
// c % S). Prints "S milliseconds" (median of 5 runs, events on the legacy default stream around all).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void k_spin(long long cycles) { long long s = clock64(); while (clock64() - s < cycles) { } }

int main(int argc, char **argv) {
    int chunks = atoi(argv[1]); size_t bytes = strtoull(argv[2], nullptr, 10);
    int spin_us = atoi(argv[3]), grid = atoi(argv[4]);
    int khz; CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    long long cycles = (long long)spin_us * khz / 1000;
    std::vector<void *> h(chunks), d(chunks);
    for (int c = 0; c < chunks; c++) { CHECK(cudaHostAlloc(&h[c], bytes, 0)); CHECK(cudaMalloc(&d[c], bytes)); }
    cudaStream_t st[8]; for (auto &s : st) CHECK(cudaStreamCreate(&s));
    cudaEvent_t a, b; CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    for (int S = 1; S <= 8; S *= 2) {
        std::vector<float> ms;
        for (int r = 0; r < 6; r++) {
            CHECK(cudaEventRecord(a));
            for (int c = 0; c < chunks; c++) {
                cudaStream_t s = st[c % S];
                CHECK(cudaMemcpyAsync(d[c], h[c], bytes, cudaMemcpyHostToDevice, s));
                k_spin<<<grid, 256, 0, s>>>(cycles);
                CHECK(cudaMemcpyAsync(h[c], d[c], bytes, cudaMemcpyDeviceToHost, s));
            }
            CHECK(cudaEventRecord(b)); CHECK(cudaEventSynchronize(b));
            float t; CHECK(cudaEventElapsedTime(&t, a, b));
            if (r) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        printf("%d %.4f\n", S, ms[ms.size() / 2]);
    }
    return 0;
}
