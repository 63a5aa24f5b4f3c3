// The H100's answers for issue 35's open figures, in plain CUDA C (no tracing):
//  1. 64 copies of 4 KiB pinned -> device on a non-blocking stream, as a loop of cudaMemcpyAsync and as one
//     cudaMemcpyBatchAsync: the host time of issuing, the events around the copies, issue + sync; median of 15.
//  2. 2-D copies (cudaMemcpy2DAsync, pinned -> device) of 64 MiB by row width, against one contiguous copy.
//  3. Virtual memory: a copy into a range mapped read-only, a range with no access set, cuMemAddressFree of a range
//     still mapped, and a kernel reading a read-only range.
// nvcc -O2 -arch=sm_90 ref_batch.cu -lcuda -o ref_batch && ./ref_batch
#include <cuda.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorName(e)); return 1; } } while (0)
static const char *cu_name(CUresult r) { const char *s = nullptr; cuGetErrorName(r, &s); return s ? s : "?"; }
static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

__global__ void read_one(const int *p, int *out) { *out = *p; }

int main() {
  const int N = 64, SZ = 4096, REPS = 15;
  char *h, *d;
  CHECK(cudaHostAlloc((void **)&h, N * SZ, 0));
  CHECK(cudaMalloc((void **)&d, N * SZ));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int mode = 0; mode < 2; ++mode) {
    std::vector<double> issue, events, total;
    for (int r = 0; r < REPS + 2; ++r) {
      CHECK(cudaStreamSynchronize(s));
      double t0 = now();
      cudaEventRecord(a, s);
      if (mode == 0) {
        for (int k = 0; k < N; ++k) CHECK(cudaMemcpyAsync(d + k * SZ, h + k * SZ, SZ, cudaMemcpyHostToDevice, s));
      } else {
        void *dsts[N], *srcs[N]; size_t sizes[N];
        for (int k = 0; k < N; ++k) { dsts[k] = d + k * SZ; srcs[k] = h + k * SZ; sizes[k] = SZ; }
        cudaMemcpyAttributes attr = {}; attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        size_t first = 0;
        CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, N, &attr, &first, 1, s));
      }
      cudaEventRecord(b, s);
      double t1 = now();
      CHECK(cudaStreamSynchronize(s));
      double t2 = now();
      float ms; cudaEventElapsedTime(&ms, a, b);
      if (r >= 2) { issue.push_back((t1 - t0) * 1e6); events.push_back(ms * 1e3); total.push_back((t2 - t0) * 1e6); }
    }
    printf("batch %s: issue %.1f us, events %.1f us, issue+sync %.1f us\n", mode ? "one cudaMemcpyBatchAsync" : "loop of cudaMemcpyAsync",
           median(issue), median(events), median(total));
  }
  // 2. 2-D copies by row width, 64 MiB each, queued back to back; events around each
  const size_t BIG = 64 << 20;
  char *hb, *db;
  CHECK(cudaHostAlloc((void **)&hb, BIG, 0));
  CHECK(cudaMalloc((void **)&db, BIG));
  for (size_t w : {4096ul, 8192ul, 16384ul, 32768ul, 65536ul, 262144ul, 1048576ul, BIG}) {
    std::vector<double> t;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(a, s);
      if (w == BIG) CHECK(cudaMemcpyAsync(db, hb, BIG, cudaMemcpyHostToDevice, s));
      else CHECK(cudaMemcpy2DAsync(db, w, hb, w, w, BIG / w, cudaMemcpyHostToDevice, s));
      cudaEventRecord(b, s);
      CHECK(cudaStreamSynchronize(s));
      float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
    }
    double m = median(t);
    printf("2-D h2d rows of %zu B (64 MiB): %.3f ms, %.1f GB/s%s\n", w, m, BIG / m / 1e6, w == BIG ? " (contiguous)" : "");
  }
  for (size_t w : {16384ul, BIG}) {  // the same, device -> host, and device -> device
    std::vector<double> t, t2;
    for (int r = 0; r < 7; ++r) {
      cudaEventRecord(a, s);
      if (w == BIG) CHECK(cudaMemcpyAsync(hb, db, BIG, cudaMemcpyDeviceToHost, s));
      else CHECK(cudaMemcpy2DAsync(hb, w, db, w, w, BIG / w, cudaMemcpyDeviceToHost, s));
      cudaEventRecord(b, s); CHECK(cudaStreamSynchronize(s));
      float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms);
    }
    printf("2-D d2h rows of %zu B (64 MiB): %.3f ms\n", w, median(t));
  }
  // 3. Virtual memory
  cuInit(0);
  CUdevice dev; cuDeviceGet(&dev, 0);
  CUmemAllocationProp prop = {}; prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE; prop.location.id = 0;
  size_t gran = 0; cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  CUmemGenericAllocationHandle hd; CUresult r = cuMemCreate(&hd, gran, &prop, 0);
  printf("vmm create %zu: %s\n", gran, cu_name(r));
  CUdeviceptr va; cuMemAddressReserve(&va, 2 * gran, 0, 0, 0);
  printf("vmm map: %s\n", cu_name(cuMemMap(va, gran, 0, hd, 0)));
  printf("copy before access set: %s\n", cudaGetErrorName(cudaMemcpy((void *)va, h, 4, cudaMemcpyHostToDevice))); cudaGetLastError();
  CUmemAccessDesc acc = {}; acc.location = prop.location; acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READ;
  printf("set access read: %s\n", cu_name(cuMemSetAccess(va, gran, &acc, 1)));
  printf("copy h2d into read-only: %s\n", cudaGetErrorName(cudaMemcpy((void *)va, h, 4, cudaMemcpyHostToDevice))); cudaGetLastError();
  printf("copy d2h from read-only: %s\n", cudaGetErrorName(cudaMemcpy(h, (void *)va, 4, cudaMemcpyDeviceToHost))); cudaGetLastError();
  printf("memset read-only: %s\n", cudaGetErrorName(cudaMemset((void *)va, 1, 4))); cudaGetLastError();
  int *out; cudaMalloc((void **)&out, 4);
  read_one<<<1, 1>>>((const int *)va, out);
  printf("kernel reading read-only: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
  printf("set access none: %s\n", cu_name(cuMemSetAccess(va, gran, &acc, 1)));
  printf("copy d2h after none: %s\n", cudaGetErrorName(cudaMemcpy(h, (void *)va, 4, cudaMemcpyDeviceToHost))); cudaGetLastError();
  printf("address free while mapped: %s\n", cu_name(cuMemAddressFree(va, 2 * gran)));
  printf("release handle while mapped: %s\n", cu_name(cuMemRelease(hd)));
  printf("unmap: %s\n", cu_name(cuMemUnmap(va, gran)));
  printf("address free: %s\n", cu_name(cuMemAddressFree(va, 2 * gran)));
  return 0;
}
