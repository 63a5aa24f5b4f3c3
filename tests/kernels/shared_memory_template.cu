/* A block reduction through a SharedMemory<T>-style struct template: a conversion operator hands out the
 * launch's dynamic shared memory as T *, and a specialization for double declares its own extern array (as
 * two extern __shared__ arrays of different types may not share a name). One template function, three
 * kernels: int, float, double. */

template <class T> struct SharedMemory {
    __device__ inline operator T *() { extern __shared__ int __smem[]; return (T *)__smem; }
    __device__ inline operator const T *() const { extern __shared__ int __smem[]; return (T *)__smem; }
};

template <> struct SharedMemory<double> {
    __device__ inline operator double *() { extern __shared__ double __smem_d[]; return (double *)__smem_d; }
    __device__ inline operator const double *() const { extern __shared__ double __smem_d[]; return (double *)__smem_d; }
};

template <class T> __device__ void reduceBlock(const T *in, T *out, unsigned n)
{
    T *s = SharedMemory<T>();
    unsigned t = threadIdx.x, i = blockIdx.x * blockDim.x + t;
    s[t] = i < n ? in[i] : (T)0;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (t < stride)
            s[t] += s[t + stride];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

extern "C" __global__ void reduceInt(const int *in, int *out, unsigned n) { reduceBlock<int>(in, out, n); }
extern "C" __global__ void reduceFloat(const float *in, float *out, unsigned n) { reduceBlock<float>(in, out, n); }
extern "C" __global__ void reduceDouble(const double *in, double *out, unsigned n) { reduceBlock<double>(in, out, n); }
