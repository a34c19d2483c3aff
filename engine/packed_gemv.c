/* Products of a few rows with a weight matrix, for decode steps on the CPU.

   y[r][o] = sum_i x[r][i] * W[o][i] (+ bias[o]) for r < rows, with W given packed as
   [blocks][steps][LANES][DEPTH]: LANES consecutive outputs side by side for each step of DEPTH
   inputs (DEPTH 2 for AVX512-BF16's input pairs, else 1), outputs and inputs past the matrix
   zero. A block is one contiguous run, so every thread streams its share of the weights front to
   back with no horizontal sums, and each weight byte is read from memory once whatever the
   number of rows (the rows of a group reuse a block from L1).

   Built at load by `engine.native_gemv` with the machine's C compiler (-O3 -march=native
   -fopenmp), once for float32 weights and once with -DWEIGHTS_BF16 for bfloat16 ones; GCC's
   vector extensions lower `vec` to AVX-512, AVX2 or NEON registers. x, bias and y are float32. The
   OpenMP runtime is the one torch already loaded (the same soname), so its threads serve both. */

#include <omp.h>
#include <stddef.h>
#include <string.h>

#if defined(__AVX512F__)
#define LANES 16
#define GROUP 8 /* rows per pass over a pair of blocks: 2 x 8 accumulators of 32 registers */
#else
#define LANES 8
#define GROUP 4 /* 16 vector registers (AVX2, NEON pairs): 2 x 4 accumulators */
#endif

typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

#if defined(WEIGHTS_BF16) && defined(__AVX512BF16__) && LANES == 16
/* bfloat16 with AVX512-BF16: each lane takes two inputs per instruction (`vdpbf16ps`), so the
   blocks hold input pairs: [blocks][ceil(in / 2)][LANES][2], and the rows' inputs go in as
   bfloat16 pairs (exact: the engine's bfloat16 activations, widened on the way in). */
#include <immintrin.h>
#define DEPTH 2
typedef unsigned short weight_t;
typedef unsigned int xval_t; /* two bfloat16 inputs */
static inline vec step(vec acc, const weight_t *w, xval_t xv) {
  __m512i raw = _mm512_loadu_si512((const void *)w);
  return (vec)_mm512_dpbf16_ps((__m512)acc, (__m512bh)raw, (__m512bh)_mm512_set1_epi32((int)xv));
}
static inline unsigned int bf16_bits(float f) {
  unsigned int u;
  memcpy(&u, &f, sizeof u);
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16; /* round to nearest even (exact for bfloat16 inputs) */
}
static inline xval_t x_at(const float *x, int in, int i) { /* inputs 2i and 2i + 1, zero past the end */
  unsigned int lo = bf16_bits(x[2 * i]), hi = 2 * i + 1 < in ? bf16_bits(x[2 * i + 1]) : 0u;
  return lo | (hi << 16);
}
#define PAIRS 1
#else
#define DEPTH 1
#define PAIRS 0
#ifdef WEIGHTS_BF16
/* bfloat16 weights (half the bytes to stream), widened to float32 as they load: a bfloat16 is
   the top half of a float32, so widening is a shift; products and sums stay float32. */
typedef unsigned short weight_t;
typedef unsigned short halves __attribute__((vector_size(LANES * sizeof(unsigned short))));
typedef unsigned int words __attribute__((vector_size(LANES * sizeof(unsigned int))));
static inline vec load(const weight_t *p) {
  halves h;
  memcpy(&h, p, sizeof h);
  words w = __builtin_convertvector(h, words) << 16;
  vec v;
  memcpy(&v, &w, sizeof v);
  return v;
}
#else
typedef float weight_t;
static inline vec load(const weight_t *p) {
  vec v;
  memcpy(&v, p, sizeof v); /* unaligned-safe; compiles to one vector load */
  return v;
}
#endif
typedef float xval_t;
static inline vec step(vec acc, const weight_t *w, xval_t xv) { return acc + load(w) * xv; }
static inline xval_t x_at(const float *x, int in, int i) { (void)in; return x[i]; }
#endif

#define STRIDE (LANES * DEPTH) /* weight elements per step of a block */

static inline void store(float *y, vec v, int n) { memcpy(y, &v, (size_t)n * sizeof(float)); }

/* One row (`xs`: its `steps` input values): four partial sums, so four chains run side by side. */
static void one_row(const xval_t *restrict xs, const weight_t *restrict block, float *restrict y, int steps, int n) {
  vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  int i = 0;
  for (; i + 4 <= steps; i += 4) {
    a0 = step(a0, block + (size_t)i * STRIDE, xs[i]);
    a1 = step(a1, block + (size_t)(i + 1) * STRIDE, xs[i + 1]);
    a2 = step(a2, block + (size_t)(i + 2) * STRIDE, xs[i + 2]);
    a3 = step(a3, block + (size_t)(i + 3) * STRIDE, xs[i + 3]);
  }
  for (; i < steps; i++) a0 = step(a0, block + (size_t)i * STRIDE, xs[i]);
  store(y, (a0 + a1) + (a2 + a3), n);
}

/* M rows (2..GROUP) against two blocks (`second` may be NULL): xt holds the rows' input values
   transposed, [steps][M], so each step's M values are adjacent. */
#define ROWS_KERNEL(M)                                                                           \
  static void rows_##M(const xval_t *restrict xt, const weight_t *restrict first,              \
                       const weight_t *restrict second, float *restrict y, int steps, int out,  \
                       int n, int n2) {                                                          \
    vec a[M] = {{0}}, b[M] = {{0}};                                                              \
    if (second) {                                                                                \
      for (int i = 0; i < steps; i++) {                                                          \
        const xval_t *xi = xt + (size_t)i * M;                                                   \
        for (int k = 0; k < M; k++) {                                                            \
          a[k] = step(a[k], first + (size_t)i * STRIDE, xi[k]);                                  \
          b[k] = step(b[k], second + (size_t)i * STRIDE, xi[k]);                                 \
        }                                                                                        \
      }                                                                                          \
    } else {                                                                                     \
      for (int i = 0; i < steps; i++) {                                                          \
        const xval_t *xi = xt + (size_t)i * M;                                                   \
        for (int k = 0; k < M; k++) a[k] = step(a[k], first + (size_t)i * STRIDE, xi[k]);       \
      }                                                                                          \
    }                                                                                            \
    for (int k = 0; k < M; k++) {                                                                \
      store(y + (size_t)k * out, a[k], n);                                                       \
      if (second) store(y + (size_t)k * out + LANES, b[k], n2);                                  \
    }                                                                                            \
  }

ROWS_KERNEL(2)
ROWS_KERNEL(3)
ROWS_KERNEL(4)
#if GROUP > 4
ROWS_KERNEL(5)
ROWS_KERNEL(6)
ROWS_KERNEL(7)
ROWS_KERNEL(8)
#endif

typedef void (*rows_kernel)(const xval_t *, const weight_t *, const weight_t *, float *, int, int, int, int);
static const rows_kernel KERNELS[GROUP + 1] = {
    0, 0, rows_2, rows_3, rows_4,
#if GROUP > 4
    rows_5, rows_6, rows_7, rows_8,
#endif
};

int hitrate_gemv_lanes(void) { return LANES; }

/* Inputs per lane per step of a block: 2 where the blocks hold input pairs (AVX512-BF16). */
int hitrate_gemv_depth(void) { return DEPTH; }

/* xt: scratch of rows * (in + 1) floats. threads: the OpenMP team size. */
void hitrate_gemv(const float *x, const weight_t *packed, const float *bias, float *y, int rows, int in, int out,
                  int threads, float *xt) {
  int blocks = (out + LANES - 1) / LANES, steps = (in + DEPTH - 1) / DEPTH;
  xval_t *xs = (xval_t *)xt;
  /* Each group of rows' input values at xs + r * steps: one row as it is, more transposed. */
  for (int r = 0; r < rows; r += GROUP) {
    int m = rows - r < GROUP ? rows - r : GROUP;
    if (m == 1 && !PAIRS) continue; /* read from x directly */
    for (int k = 0; k < m; k++)
      for (int i = 0; i < steps; i++) xs[(size_t)r * steps + (size_t)i * m + k] = x_at(x + (size_t)(r + k) * in, in, i);
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), team = omp_get_num_threads();
    int lo = (int)((long)blocks * t / team), hi = (int)((long)blocks * (t + 1) / team);
    for (int b = lo; b < hi; b += 2) {
      int o = b * LANES, n = out - o < LANES ? out - o : LANES;
      const weight_t *first = packed + (size_t)b * steps * STRIDE;
      const weight_t *second = b + 1 < hi ? first + (size_t)steps * STRIDE : NULL;
      int n2 = second ? (out - o - LANES < LANES ? out - o - LANES : LANES) : 0;
      for (int r = 0; r < rows; r += GROUP) {
        int m = rows - r < GROUP ? rows - r : GROUP;
        float *yr = y + (size_t)r * out + o;
        if (m == 1) {
          const xval_t *row = PAIRS ? xs + (size_t)r * steps : (const xval_t *)(x + (size_t)r * in);
          one_row(row, first, yr, steps, n);
          if (second) one_row(row, second, yr + LANES, steps, n2);
        } else {
          KERNELS[m](xs + (size_t)r * steps, first, second, yr, steps, out, n, n2);
        }
      }
      if (bias)
        for (int r = 0; r < rows; r++)
          for (int j = 0; j < n + n2; j++) y[(size_t)r * out + o + j] += bias[o + j];
    }
  }
}
