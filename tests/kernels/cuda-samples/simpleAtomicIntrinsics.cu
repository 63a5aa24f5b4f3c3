/* Wrapper (ours, not NVIDIA's): `kernel load` this file to get the sample's kernel, which lives in a
 * header that is #included unchanged from beside it. */

#include "simpleAtomicIntrinsics_kernel.cuh"
