// Doubles each of the first n elements of a.
__global__ void twice(float *a, int n)
{
    int i = threadIdx.x;  // the bug: the index within the block only, so only a[0..255] are doubled
    if (i < n)
        a[i] *= 2.0f;
}
