// The plain-CUDA-C reference for benchmarks/gpu_copy.py: pinned (cudaHostAlloc) and pageable (malloc)
// H2D and D2H at the sizes given, each the median of REPS copies timed with events, plus the median host
// time of one 4-byte synchronous cudaMemcpy from pinned memory. Prints "kind dir bytes gbps" lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main(int argc, char **argv) {
    const int REPS = 30;
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    for (int i = 1; i < argc; i++) {
        size_t bytes = strtoull(argv[i], nullptr, 10);
        void *dev, *pinned, *pageable = malloc(bytes);
        memset(pageable, 1, bytes);
        CHECK(cudaMalloc(&dev, bytes));
        CHECK(cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault));
        memset(pinned, 1, bytes);
        struct { const char *kind; void *host; } kinds[] = {{"pinned", pinned}, {"pageable", pageable}};
        for (auto &k : kinds) {
            for (int dir = 0; dir < 2; dir++) {
                std::vector<double> gbps;
                for (int r = 0; r < REPS + 2; r++) {
                    CHECK(cudaEventRecord(a));
                    if (dir == 0) CHECK(cudaMemcpy(dev, k.host, bytes, cudaMemcpyHostToDevice));
                    else CHECK(cudaMemcpy(k.host, dev, bytes, cudaMemcpyDeviceToHost));
                    CHECK(cudaEventRecord(b)); CHECK(cudaEventSynchronize(b));
                    float ms; CHECK(cudaEventElapsedTime(&ms, a, b));
                    if (r >= 2) gbps.push_back(bytes / (ms * 1e-3) / 1e9);
                }
                printf("%s %s %zu %.3f\n", k.kind, dir == 0 ? "h2d" : "d2h", bytes, median(gbps));
            }
        }
        CHECK(cudaFree(dev)); CHECK(cudaFreeHost(pinned)); free(pageable);
    }
    void *dev, *pinned;
    CHECK(cudaMalloc(&dev, 4)); CHECK(cudaHostAlloc(&pinned, 4, cudaHostAllocDefault));
    std::vector<double> us;
    for (int r = 0; r < 2000; r++) {
        auto t0 = std::chrono::steady_clock::now();
        CHECK(cudaMemcpy(dev, pinned, 4, cudaMemcpyHostToDevice));
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    printf("small h2d 4 %.3f\n", median(us));
    return 0;
}
