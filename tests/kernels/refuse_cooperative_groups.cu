/* Out of the simulator's subset: cooperative groups. `kernel load` must refuse it on the simulator.
 * (nvcc compiles it.) */

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

extern "C" __global__ void groupSync(int *out)
{
    cg::thread_block block = cg::this_thread_block();
    out[block.thread_rank()] = 1;
    block.sync();
}
