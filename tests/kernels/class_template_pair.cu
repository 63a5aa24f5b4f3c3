/* A struct template instantiated for int, filled by a braced list (once refused by the simulator). */

template <typename T>
struct Pair {
    T first, second;
};

extern "C" __global__ void pairSum(int *out)
{
    Pair<int> p = {3, 4};
    out[threadIdx.x] = p.first + p.second;
}
