// The plain-CUDA-C reference for benchmarks/small_sizes.py, measured with the method `bench memcpy` and
// `bench latency` use:
//  - gated pinned H2D at each size given: a one-thread kernel holds the default stream on a mapped flag (as
//    nvbandwidth does) while N copies (256 MiB worth, 8..128) from two rotating buffer pairs are queued, then
//    the host sets the flag; events after the gate and after the copies; the median of 9 batches.
//    Prints "gated BYTES GBPS US_PER_COPY".
//  - latency: the host time of one round, 2000 rounds: synchronous 4-byte copies (pageable, pinned; each
//    direction), an empty kernel's launch (alone; and with a stream sync), an event record, and a host function
//    that does nothing queued and waited for. Prints "latency|NAME|MEDIAN|P10|P90" (µs).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)

__global__ void hold(const volatile unsigned *flag) { while (*flag == 0) { __nanosleep(500); } }
__global__ void empty() {}
static void CUDART_CB noop(void *) {}

static double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[(size_t)(p * (v.size() - 1))];
}

template <class F> static void latency(const char *name, F round) {
    const int ROUNDS = 2000;
    for (int r = 0; r < 100; r++) round();
    std::vector<double> us;
    for (int r = 0; r < ROUNDS; r++) {
        auto t0 = std::chrono::steady_clock::now();
        round();
        us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    CHECK(cudaDeviceSynchronize());
    printf("latency|%s|%.3f|%.3f|%.3f\n", name, pct(us, 0.5), pct(us, 0.1), pct(us, 0.9));
}

int main(int argc, char **argv) {
    CHECK(cudaSetDeviceFlags(cudaDeviceMapHost));
    unsigned *flag, *flag_dev;
    CHECK(cudaHostAlloc((void **)&flag, 4, cudaHostAllocMapped));
    CHECK(cudaHostGetDevicePointer((void **)&flag_dev, flag, 0));
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    for (int i = 1; i < argc; i++) {
        size_t bytes = strtoull(argv[i], nullptr, 10);
        int n = (int)std::max<size_t>(8, std::min<size_t>(128, (256u << 20) / bytes));
        void *host[2], *dev[2];
        for (int k = 0; k < 2; k++) {
            CHECK(cudaHostAlloc(&host[k], bytes, cudaHostAllocDefault));
            memset(host[k], 1, bytes);
            CHECK(cudaMalloc(&dev[k], bytes));
        }
        std::vector<double> gbps, us;
        for (int r = 0; r < 10; r++) {
            *(volatile unsigned *)flag = 0;
            hold<<<1, 1>>>(flag_dev);
            CHECK(cudaEventRecord(a));
            for (int c = 0; c < n; c++) CHECK(cudaMemcpyAsync(dev[c % 2], host[c % 2], bytes, cudaMemcpyHostToDevice));
            CHECK(cudaEventRecord(b));
            *(volatile unsigned *)flag = 1;
            CHECK(cudaEventSynchronize(b));
            float ms; CHECK(cudaEventElapsedTime(&ms, a, b));
            if (r) { gbps.push_back((double)bytes * n / (ms * 1e-3) / 1e9); us.push_back(ms * 1e3 / n); }
        }
        printf("gated %zu %.3f %.3f\n", bytes, pct(gbps, 0.5), pct(us, 0.5));
        for (int k = 0; k < 2; k++) { CHECK(cudaFreeHost(host[k])); CHECK(cudaFree(dev[k])); }
    }
    void *dev, *pinned, *pageable = malloc(4096);
    memset(pageable, 1, 4096);
    CHECK(cudaMalloc(&dev, 4096)); CHECK(cudaHostAlloc(&pinned, 4096, cudaHostAllocDefault));
    latency("memcpy h2d pageable 4 B", [&] { CHECK(cudaMemcpy(dev, pageable, 4, cudaMemcpyHostToDevice)); });
    latency("memcpy d2h pageable 4 B", [&] { CHECK(cudaMemcpy(pageable, dev, 4, cudaMemcpyDeviceToHost)); });
    latency("memcpy h2d pinned 4 B", [&] { CHECK(cudaMemcpy(dev, pinned, 4, cudaMemcpyHostToDevice)); });
    latency("memcpy d2h pinned 4 B", [&] { CHECK(cudaMemcpy(pinned, dev, 4, cudaMemcpyDeviceToHost)); });
    latency("kernel launch (the call)", [&] { empty<<<1, 1>>>(); });
    latency("kernel launch + sync", [&] { empty<<<1, 1>>>(); CHECK(cudaStreamSynchronize(0)); });
    latency("event record", [&] { CHECK(cudaEventRecord(a)); });
    latency("host callback + sync", [&] { CHECK(cudaLaunchHostFunc(0, noop, nullptr)); CHECK(cudaStreamSynchronize(0)); });
    return 0;
}
