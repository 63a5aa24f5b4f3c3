// Issue 14's reference: cudaMemcpyPeerAsync between every ordered pair of GPUs, peer access off and on,
// REPS copies of BYTES back to back on a stream of the source device, timed by events after one warm-up copy.
// Prints one line per measurement: SRC DST PEER(0|1) SECONDS_PER_COPY
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>
#define CHECK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
    fprintf(stderr, "%s failed: %s\n", #x, cudaGetErrorName(e_)); exit(1); } } while (0)

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? strtoull(argv[1], 0, 10) : (256ull << 20);
    int reps = argc > 2 ? atoi(argv[2]) : 10, n = 0;
    CHECK(cudaGetDeviceCount(&n));
    for (int src = 0; src < n; src++)
        for (int dst = 0; dst < n; dst++) {
            if (src == dst) continue;
            int can = 0;
            CHECK(cudaDeviceCanAccessPeer(&can, src, dst));
            for (int peer = 0; peer <= can; peer++) {
                void *a, *b;
                CHECK(cudaSetDevice(dst)); CHECK(cudaMalloc(&b, bytes));
                if (peer) CHECK(cudaDeviceEnablePeerAccess(src, 0));
                CHECK(cudaSetDevice(src)); CHECK(cudaMalloc(&a, bytes));
                if (peer) CHECK(cudaDeviceEnablePeerAccess(dst, 0));
                cudaStream_t s; cudaEvent_t e0, e1;
                CHECK(cudaStreamCreate(&s)); CHECK(cudaEventCreate(&e0)); CHECK(cudaEventCreate(&e1));
                CHECK(cudaMemcpyPeerAsync(b, dst, a, src, bytes, s));
                CHECK(cudaEventRecord(e0, s));
                for (int r = 0; r < reps; r++) CHECK(cudaMemcpyPeerAsync(b, dst, a, src, bytes, s));
                CHECK(cudaEventRecord(e1, s)); CHECK(cudaEventSynchronize(e1));
                float ms; CHECK(cudaEventElapsedTime(&ms, e0, e1));
                printf("%d %d %d %.9f\n", src, dst, peer, ms / 1e3 / reps);
                CHECK(cudaStreamDestroy(s)); CHECK(cudaEventDestroy(e0)); CHECK(cudaEventDestroy(e1));
                CHECK(cudaFree(a));
                if (peer) CHECK(cudaDeviceDisablePeerAccess(dst));
                CHECK(cudaSetDevice(dst)); CHECK(cudaFree(b));
                if (peer) CHECK(cudaDeviceDisablePeerAccess(src));
            }
        }
    return 0;
}
