/* Out of the simulator's subset: a grid-wide sync of cooperative groups, which needs a cooperative launch
 * (cudaLaunchCooperativeKernel). `kernel load` must refuse it on the simulator, naming it. (nvcc compiles it.) */

#include <cooperative_groups.h>

namespace cg = cooperative_groups;

extern "C" __global__ void gridSync(int *out)
{
    cg::grid_group grid = cg::this_grid();
    out[grid.thread_rank()] = 1;
    grid.sync();
}
