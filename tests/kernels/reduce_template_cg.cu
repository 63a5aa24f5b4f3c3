/* A block reduction written once for any T: the dynamic shared memory is reached through a struct template
 * with conversion operators (the SharedMemory<T> idiom), the block synchronises through cooperative groups,
 * and the last 64 partial sums are finished by one warp-sized tile with cg::reduce. Integer inputs, so the
 * sum is the same in any order (for double too). */

#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

template <class T> struct DynamicShared {
    __device__ operator T *()
    {
        extern __shared__ int rawShared[];
        return (T *)rawShared;
    }
    __device__ operator const T *() const
    {
        extern __shared__ int rawShared[];
        return (const T *)rawShared;
    }
};

template <class T> __device__ void blockSum(const int *in, T *out, int n)
{
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    T *partial = DynamicShared<T>();
    unsigned int tid = block.thread_rank();

    T sum = 0;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x)
        sum += (T)in[i];
    partial[tid] = sum;
    block.sync();

    for (unsigned int half = block.size() / 2; half >= 64; half /= 2) {
        if (tid < half)
            partial[tid] += partial[tid + half];
        block.sync();
    }
    if (tid < 32) {
        T v = cg::reduce(tile, partial[tid] + partial[tid + 32], cg::plus<T>());
        if (tile.thread_rank() == 0)
            out[blockIdx.x] = v;
    }
}

extern "C" __global__ void blockSumInt(const int *in, int *out, int n) { blockSum<int>(in, out, n); }

extern "C" __global__ void blockSumDouble(const int *in, double *out, int n) { blockSum<double>(in, out, n); }
