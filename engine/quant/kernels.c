/* Products with GGUF-quantized weight matrices, the weights read in their stored blocks.

   A matrix is `out` rows of `row_bytes` bytes, each row `in / B` blocks of one GGUF type
   (layouts in formats.py; B = 32 or 256 values, 1 for F32/F16/BF16 taken 32 at a time). Each
   block's weights are formed in float32 exactly as the reference dequantization forms them
   (every d * scale * q product is exact in float32), into a buffer of at most 256 floats that
   stays in L1, and multiplied there with the activation rows: each weight byte is read from
   memory once for all the rows of a call.

   hitrate_quant_gemv: y[r][o] = sum_i x[r][i] * W[o][i] (+ bias[o]), parallel over output rows
   on the OpenMP team torch already loaded (engine/native_gemv.py explains why that is the same
   team). Rows go GROUP at a time: each weight vector formed once feeds GROUP accumulators.
   hitrate_quant_dequantize: float32 rows, all or those at ids (prefill tiles, embedding lookups).

   Built at load by `engine.quant.native` with the machine's C compiler (-O3 -march=native
   -fopenmp); GCC's vector extensions lower `vec` to AVX-512, AVX2 or NEON registers. */

#include <omp.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__AVX512F__)
#define LANES 16
#else
#define LANES 8
#endif
#define GROUP 8 /* activation rows per pass over a weight row */
#define MAX_BLOCK 256

typedef float vec __attribute__((vector_size(LANES * sizeof(float))));

/* ggml's type numbers (gguf.GGMLQuantizationType). */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q5_0 = 6, T_Q8_0 = 8, T_Q4_K = 12, T_Q6_K = 14, T_Q8_K = 15, T_BF16 = 30 };

static inline vec vload(const float *p) {
  vec v;
  memcpy(&v, p, sizeof v);
  return v;
}

static inline float half(const uint8_t *p) {
  _Float16 h;
  memcpy(&h, p, sizeof h);
  return (float)h;
}

static inline float bf16(const uint8_t *p) {
  uint16_t h;
  memcpy(&h, p, sizeof h);
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* ---- one block of each type into float32 `o` ---- */

static void deq_f32(const uint8_t *b, float *o) { memcpy(o, b, 32 * sizeof(float)); }

static void deq_f16(const uint8_t *b, float *o) {
  for (int j = 0; j < 32; j++) o[j] = half(b + 2 * j);
}

static void deq_bf16(const uint8_t *b, float *o) {
  for (int j = 0; j < 32; j++) o[j] = bf16(b + 2 * j);
}

static void deq_q4_0(const uint8_t *b, float *o) {
  float d = half(b);
  const uint8_t *qs = b + 2;
  for (int j = 0; j < 16; j++) {
    o[j] = d * (float)((int)(qs[j] & 0xF) - 8);
    o[j + 16] = d * (float)((int)(qs[j] >> 4) - 8);
  }
}

static void deq_q5_0(const uint8_t *b, float *o) {
  float d = half(b);
  uint32_t qh;
  memcpy(&qh, b + 2, 4);
  const uint8_t *qs = b + 6;
  for (int j = 0; j < 16; j++) {
    int lo = (qs[j] & 0xF) | (int)(((qh >> j) & 1u) << 4);
    int hi = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
    o[j] = d * (float)(lo - 16);
    o[j + 16] = d * (float)(hi - 16);
  }
}

static void deq_q8_0(const uint8_t *b, float *o) {
  float d = half(b);
  const int8_t *q = (const int8_t *)(b + 2);
  for (int j = 0; j < 32; j++) o[j] = d * (float)q[j];
}

/* Q4_K's 6-bit scale and min of sub-block j from the 12 packed bytes. */
static inline void scale_min_k4(int j, const uint8_t *q, int *s, int *m) {
  if (j < 4) {
    *s = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *s = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

static void deq_q4_k(const uint8_t *b, float *o) {
  float d = half(b), dmin = half(b + 2);
  const uint8_t *scales = b + 4, *qs = b + 16;
  for (int c = 0; c < 4; c++) {
    int s1, m1, s2, m2;
    scale_min_k4(2 * c, scales, &s1, &m1);
    scale_min_k4(2 * c + 1, scales, &s2, &m2);
    float d1 = d * (float)s1, n1 = dmin * (float)m1, d2 = d * (float)s2, n2 = dmin * (float)m2;
    const uint8_t *q = qs + 32 * c;
    float *oc = o + 64 * c;
    for (int l = 0; l < 32; l++) {
      oc[l] = d1 * (float)(q[l] & 0xF) - n1;
      oc[l + 32] = d2 * (float)(q[l] >> 4) - n2;
    }
  }
}

static void deq_q6_k(const uint8_t *b, float *o) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = half(b + 208);
  for (int h = 0; h < 2; h++) {
    float *oh = o + 128 * h;
    const uint8_t *l0 = ql + 64 * h, *h0 = qh + 32 * h;
    const int8_t *s = sc + 8 * h;
    float ds[8];
    for (int k = 0; k < 8; k++) ds[k] = d * (float)s[k];
    for (int l = 0; l < 32; l++) {
      int q1 = ((l0[l] & 0xF) | (((h0[l] >> 0) & 3) << 4)) - 32;
      int q2 = ((l0[l + 32] & 0xF) | (((h0[l] >> 2) & 3) << 4)) - 32;
      int q3 = ((l0[l] >> 4) | (((h0[l] >> 4) & 3) << 4)) - 32;
      int q4 = ((l0[l + 32] >> 4) | (((h0[l] >> 6) & 3) << 4)) - 32;
      oh[l] = ds[l / 16] * (float)q1;
      oh[l + 32] = ds[2 + l / 16] * (float)q2;
      oh[l + 64] = ds[4 + l / 16] * (float)q3;
      oh[l + 96] = ds[6 + l / 16] * (float)q4;
    }
  }
}

static void deq_q8_k(const uint8_t *b, float *o) {
  float d;
  memcpy(&d, b, 4);
  const int8_t *q = (const int8_t *)(b + 4);
  for (int j = 0; j < 256; j++) o[j] = d * (float)q[j];
}

typedef void (*deq_fn)(const uint8_t *, float *);

typedef struct {
  deq_fn deq;
  int values; /* per block as deq forms it */
  int bytes;  /* of such a block */
} format;

static int format_of(int qtype, format *f) {
  switch (qtype) {
    case T_F32: *f = (format){deq_f32, 32, 128}; return 0;
    case T_F16: *f = (format){deq_f16, 32, 64}; return 0;
    case T_BF16: *f = (format){deq_bf16, 32, 64}; return 0;
    case T_Q4_0: *f = (format){deq_q4_0, 32, 18}; return 0;
    case T_Q5_0: *f = (format){deq_q5_0, 32, 22}; return 0;
    case T_Q8_0: *f = (format){deq_q8_0, 32, 34}; return 0;
    case T_Q4_K: *f = (format){deq_q4_k, 256, 144}; return 0;
    case T_Q6_K: *f = (format){deq_q6_k, 256, 210}; return 0;
    case T_Q8_K: *f = (format){deq_q8_k, 256, 292}; return 0;
    default: return -1;
  }
}

static inline float hsum(vec v) {
  float s = 0.0f;
  for (int k = 0; k < LANES; k++) s += v[k];
  return s;
}

/* M rows of x (row stride `in`) against one weight row. */
#define ROW_KERNEL(M)                                                                               \
  static void row_##M(const format *f, const uint8_t *w, const float *x, int in, float *y,       \
                      int out) {                                                                  \
    float buf[MAX_BLOCK] __attribute__((aligned(64)));                                            \
    vec acc[M] = {{0}};                                                                           \
    int blocks = in / f->values;                                                                  \
    for (int b = 0; b < blocks; b++) {                                                            \
      f->deq(w + (size_t)b * f->bytes, buf);                                                      \
      const float *xb = x + (size_t)b * f->values;                                                \
      for (int i = 0; i < f->values; i += LANES) {                                                \
        vec wv = vload(buf + i);                                                                  \
        for (int k = 0; k < M; k++) acc[k] += wv * vload(xb + (size_t)k * in + i);                \
      }                                                                                           \
    }                                                                                             \
    for (int k = 0; k < M; k++) y[(size_t)k * out] = hsum(acc[k]);                                \
  }

ROW_KERNEL(1)
ROW_KERNEL(2)
ROW_KERNEL(3)
ROW_KERNEL(4)
ROW_KERNEL(5)
ROW_KERNEL(6)
ROW_KERNEL(7)
ROW_KERNEL(8)

typedef void (*row_kernel)(const format *, const uint8_t *, const float *, int, float *, int);
static const row_kernel ROWS[GROUP + 1] = {0, row_1, row_2, row_3, row_4, row_5, row_6, row_7, row_8};

int hitrate_quant_gemv(int qtype, const uint8_t *w, size_t row_bytes, const float *x, const float *bias, float *y,
                       int rows, int in, int out, int threads) {
  format f;
  if (format_of(qtype, &f) != 0 || in % f.values != 0) return -1;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int o = 0; o < out; o++) {
    const uint8_t *wo = w + (size_t)o * row_bytes;
    for (int r = 0; r < rows; r += GROUP) {
      int m = rows - r < GROUP ? rows - r : GROUP;
      ROWS[m](&f, wo, x + (size_t)r * in, in, y + (size_t)r * out + o, out);
    }
    if (bias)
      for (int r = 0; r < rows; r++) y[(size_t)r * out + o] += bias[o];
  }
  return 0;
}

/* Rows ids[0..n) (or 0..n when ids is NULL) of W into out [n][in]. */
int hitrate_quant_dequantize(int qtype, const uint8_t *w, size_t row_bytes, const int64_t *ids, int n, int in,
                             float *out, int threads) {
  format f;
  if (format_of(qtype, &f) != 0 || in % f.values != 0) return -1;
  int blocks = in / f.values;
#pragma omp parallel for num_threads(threads) schedule(static) if (n > 1)
  for (int r = 0; r < n; r++) {
    const uint8_t *row = w + (size_t)(ids ? ids[r] : r) * row_bytes;
    float *o = out + (size_t)r * in;
    for (int b = 0; b < blocks; b++) f.deq(row + (size_t)b * f.bytes, o + (size_t)b * f.values);
  }
  return 0;
}
