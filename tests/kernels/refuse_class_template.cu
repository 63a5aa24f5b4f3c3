/* Out of the simulator's subset: a class template. `kernel load` must refuse it on the simulator,
 * saying so, rather than run something else. (nvcc compiles it.) */

template <typename T>
struct Pair {
    T first, second;
};

extern "C" __global__ void pairSum(int *out)
{
    Pair<int> p = {3, 4};
    out[threadIdx.x] = p.first + p.second;
}
