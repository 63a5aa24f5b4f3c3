/* Wrapper (ours, not NVIDIA's): `kernel load` this file to get the sample's three vote kernels, which
 * live in a header that is #included unchanged from beside it. */

#include "simpleVote_kernel.cuh"
