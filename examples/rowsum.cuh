#define WARP 32

struct Span { const float *p; int n; };

template <typename T>
__device__ T clampTo(T v, T lo, T hi) { return v < lo ? lo : v > hi ? hi : v; }
