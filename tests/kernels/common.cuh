/* Helpers for templates.cu, included from beside it: macros with arguments and a guarded default. */

#ifndef CORPUS_COMMON_CUH
#define CORPUS_COMMON_CUH

#define SQUARE(x) ((x) * (x))
#define CLAMP(v, lo, hi) ((v) < (lo) ? (lo) : (v) > (hi) ? (hi) : (v))

#ifndef WIDTH
#define WIDTH 4
#endif

#endif
