/* A class with member functions, one of them const (once refused by the simulator). */

class Counter {
public:
    __device__ void add(int v) { total += v; }
    __device__ int value() const { return total; }
    int total;
};

extern "C" __global__ void countUp(int *out, int n)
{
    Counter c;
    c.total = 0;
    for (int k = 0; k < n; ++k)
        c.add(k);
    out[threadIdx.x] = c.value();
}
