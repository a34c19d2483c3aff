/* Float32 products of a few rows with a weight matrix, for decode steps on the CPU.

   y[r][o] = sum_i x[r][i] * W[o][i] (+ bias[o]) for r < rows, with W given packed as
   [blocks][in][LANES]: LANES consecutive outputs side by side for each input, the last block
   zero-padded. A block is one contiguous run of in * LANES floats, so every thread streams its
   share of the weights front to back with no horizontal sums, and each weight byte is read from
   memory once whatever the number of rows (the rows of a group reuse a block from L1).

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

static inline void store(float *y, vec v, int n) { memcpy(y, &v, (size_t)n * sizeof(float)); }

/* One row: four partial sums over the inputs, so four FMA chains run side by side. */
static void one_row(const float *restrict x, const weight_t *restrict block, float *restrict y, int in, int n) {
  vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
  int i = 0;
  for (; i + 4 <= in; i += 4) {
    a0 += load(block + (size_t)i * LANES) * x[i];
    a1 += load(block + (size_t)(i + 1) * LANES) * x[i + 1];
    a2 += load(block + (size_t)(i + 2) * LANES) * x[i + 2];
    a3 += load(block + (size_t)(i + 3) * LANES) * x[i + 3];
  }
  for (; i < in; i++) a0 += load(block + (size_t)i * LANES) * x[i];
  store(y, (a0 + a1) + (a2 + a3), n);
}

/* M rows (2..GROUP) against two blocks (`second` may be NULL): xt holds the rows transposed,
   [in][M], so each input's M values are adjacent. */
#define ROWS_KERNEL(M)                                                                           \
  static void rows_##M(const float *restrict xt, const weight_t *restrict first,               \
                       const weight_t *restrict second, float *restrict y, int in, int out, int n, \
                       int n2) {                                                                 \
    vec a[M] = {{0}}, b[M] = {{0}};                                                              \
    if (second) {                                                                                \
      for (int i = 0; i < in; i++) {                                                             \
        vec w = load(first + (size_t)i * LANES), w2 = load(second + (size_t)i * LANES);          \
        const float *xi = xt + (size_t)i * M;                                                    \
        for (int k = 0; k < M; k++) {                                                            \
          a[k] += w * xi[k];                                                                     \
          b[k] += w2 * xi[k];                                                                    \
        }                                                                                        \
      }                                                                                          \
    } else {                                                                                     \
      for (int i = 0; i < in; i++) {                                                             \
        vec w = load(first + (size_t)i * LANES);                                                 \
        const float *xi = xt + (size_t)i * M;                                                    \
        for (int k = 0; k < M; k++) a[k] += w * xi[k];                                           \
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

typedef void (*rows_kernel)(const float *, const weight_t *, const weight_t *, float *, int, int, int, int);
static const rows_kernel KERNELS[GROUP + 1] = {
    0, 0, rows_2, rows_3, rows_4,
#if GROUP > 4
    rows_5, rows_6, rows_7, rows_8,
#endif
};

int hitrate_gemv_lanes(void) { return LANES; }

/* xt: scratch of rows * in floats (unused for one row). threads: the OpenMP team size. */
void hitrate_gemv(const float *x, const weight_t *packed, const float *bias, float *y, int rows, int in, int out,
                  int threads, float *xt) {
  int blocks = (out + LANES - 1) / LANES;
  for (int r = 0; rows > 1 && r < rows; r += GROUP) { /* each group transposed at xt + r * in */
    int m = rows - r < GROUP ? rows - r : GROUP;
    for (int k = 0; k < m; k++)
      for (int i = 0; i < in; i++) xt[(size_t)r * in + (size_t)i * m + k] = x[(size_t)(r + k) * in + i];
  }
#pragma omp parallel num_threads(threads)
  {
    int t = omp_get_thread_num(), team = omp_get_num_threads();
    int lo = (int)((long)blocks * t / team), hi = (int)((long)blocks * (t + 1) / team);
    for (int b = lo; b < hi; b += 2) {
      int o = b * LANES, n = out - o < LANES ? out - o : LANES;
      const weight_t *first = packed + (size_t)b * in * LANES;
      const weight_t *second = b + 1 < hi ? first + (size_t)in * LANES : NULL;
      int n2 = second ? (out - o - LANES < LANES ? out - o - LANES : LANES) : 0;
      for (int r = 0; r < rows; r += GROUP) {
        int m = rows - r < GROUP ? rows - r : GROUP;
        float *yr = y + (size_t)r * out + o;
        if (m == 1) {
          one_row(x + (size_t)r * in, first, yr, in, n);
          if (second) one_row(x + (size_t)r * in, second, yr + LANES, in, n2);
        } else {
          KERNELS[m](xt + (size_t)r * in, first, second, yr, in, out, n, n2);
        }
      }
      if (bias)
        for (int r = 0; r < rows; r++)
          for (int j = 0; j < n + n2; j++) y[(size_t)r * out + o + j] += bias[o + j];
    }
  }
}
