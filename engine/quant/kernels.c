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
static const row_kernel ROWS[GROUP + 1] __attribute__((unused)) = {0, row_1, row_2, row_3, row_4, row_5, row_6, row_7, row_8};

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
/* ---- AVX-512: each block's weights formed 16 at a time in a register (no buffer) and fed to the
   M rows' accumulators at once. The weights are the reference's float32 values bit for bit (an
   FMA of an exact product and one subtraction rounds as the reference's two steps do). ---- */
#include <immintrin.h>
#define FUSED 1
#define INLINE static inline __attribute__((always_inline))

/* Few rows would wait on one FMA chain each (4 cycles a step): their products alternate between
   SLOTS(m) sets of accumulators, chosen by the position of the 16 weights in the block. */
#define SLOTS(m) ((m) == 1 ? 4 : (m) <= 3 ? 2 : 1)

INLINE void feed(__m512 wv, const float *x, size_t in, __m512 *acc, int m, int chunk) {
  __m512 *a = acc + (chunk & (SLOTS(m) - 1)) * m;
  for (int k = 0; k < m; k++) a[k] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + (size_t)k * in), a[k]);
}

INLINE __m512 from_u8(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q)); }
INLINE __m512 from_i8(__m128i q) { return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)); }

INLINE void f32_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  feed(_mm512_loadu_ps((const float *)b), x, in, acc, m, 0);
  feed(_mm512_loadu_ps((const float *)b + 16), x + 16, in, acc, m, 1);
}

INLINE void f16_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  feed(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)b)), x, in, acc, m, 0);
  feed(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 32))), x + 16, in, acc, m, 1);
}

INLINE void bf16_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    __m512i w = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(b + 32 * h))), 16);
    feed(_mm512_castsi512_ps(w), x + 16 * h, in, acc, m, h);
  }
}

INLINE void q8_0_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  __m512 d = _mm512_set1_ps(half(b));
  feed(_mm512_mul_ps(d, from_i8(_mm_loadu_si128((const __m128i *)(b + 2)))), x, in, acc, m, 0);
  feed(_mm512_mul_ps(d, from_i8(_mm_loadu_si128((const __m128i *)(b + 18)))), x + 16, in, acc, m, 1);
}

INLINE void q4_0_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  __m512 d = _mm512_set1_ps(half(b));
  __m128i qs = _mm_loadu_si128((const __m128i *)(b + 2)), low = _mm_set1_epi8(0xF), eight = _mm_set1_epi8(8);
  __m128i lo = _mm_sub_epi8(_mm_and_si128(qs, low), eight);
  __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(qs, 4), low), eight);
  feed(_mm512_mul_ps(d, from_i8(lo)), x, in, acc, m, 0);
  feed(_mm512_mul_ps(d, from_i8(hi)), x + 16, in, acc, m, 1);
}

INLINE void q5_0_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  __m512 d = _mm512_set1_ps(half(b));
  uint32_t qh;
  memcpy(&qh, b + 2, 4);
  __m128i qs = _mm_loadu_si128((const __m128i *)(b + 6)), low = _mm_set1_epi8(0xF), bit = _mm_set1_epi8(0x10);
  __m128i sixteen = _mm_set1_epi8(16);
  /* the 5th bits: bit j of qh as byte j of a mask (0x10 where set) */
  __m128i h0 = _mm_and_si128(_mm_movm_epi8((__mmask16)(qh & 0xFFFF)), bit);
  __m128i h1 = _mm_and_si128(_mm_movm_epi8((__mmask16)(qh >> 16)), bit);
  __m128i lo = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(qs, low), h0), sixteen);
  __m128i hi = _mm_sub_epi8(_mm_or_si128(_mm_and_si128(_mm_srli_epi16(qs, 4), low), h1), sixteen);
  feed(_mm512_mul_ps(d, from_i8(lo)), x, in, acc, m, 0);
  feed(_mm512_mul_ps(d, from_i8(hi)), x + 16, in, acc, m, 1);
}

INLINE void q4_k_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  float d = half(b), dmin = half(b + 2);
  const uint8_t *scales = b + 4, *qs = b + 16;
  __m128i low = _mm_set1_epi8(0xF);
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    int s1, m1, s2, m2;
    scale_min_k4(2 * c, scales, &s1, &m1);
    scale_min_k4(2 * c + 1, scales, &s2, &m2);
    __m512 d1 = _mm512_set1_ps(d * (float)s1), n1 = _mm512_set1_ps(dmin * (float)m1);
    __m512 d2 = _mm512_set1_ps(d * (float)s2), n2 = _mm512_set1_ps(dmin * (float)m2);
    const float *xc = x + 64 * c;
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
      __m128i q = _mm_loadu_si128((const __m128i *)(qs + 32 * c + 16 * h));
      __m128i lo = _mm_and_si128(q, low), hi = _mm_and_si128(_mm_srli_epi16(q, 4), low);
      feed(_mm512_fmsub_ps(d1, from_u8(lo), n1), xc + 16 * h, in, acc, m, h);
      feed(_mm512_fmsub_ps(d2, from_u8(hi), n2), xc + 32 + 16 * h, in, acc, m, 2 + h);
    }
  }
}

INLINE void q6_k_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = half(b + 208);
  __m128i low = _mm_set1_epi8(0xF), two = _mm_set1_epi8(3), bias = _mm_set1_epi8(32);
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
#pragma GCC unroll 2
    for (int l = 0; l < 32; l += 16) {
      __m128i a = _mm_loadu_si128((const __m128i *)(ql + 64 * h + l));
      __m128i c = _mm_loadu_si128((const __m128i *)(ql + 64 * h + 32 + l));
      __m128i e = _mm_loadu_si128((const __m128i *)(qh + 32 * h + l));
      __m128i q1 = _mm_or_si128(_mm_and_si128(a, low), _mm_slli_epi16(_mm_and_si128(e, two), 4));
      __m128i q2 = _mm_or_si128(_mm_and_si128(c, low), _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(e, 2), two), 4));
      __m128i q3 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(a, 4), low),
                                _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(e, 4), two), 4));
      __m128i q4 = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(c, 4), low),
                                _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(e, 6), two), 4));
      const int8_t *s = sc + 8 * h + l / 16;
      const float *xh = x + 128 * h + l;
      feed(_mm512_mul_ps(_mm512_set1_ps(d * (float)s[0]), from_i8(_mm_sub_epi8(q1, bias))), xh, in, acc, m, 0);
      feed(_mm512_mul_ps(_mm512_set1_ps(d * (float)s[2]), from_i8(_mm_sub_epi8(q2, bias))), xh + 32, in, acc, m, 1);
      feed(_mm512_mul_ps(_mm512_set1_ps(d * (float)s[4]), from_i8(_mm_sub_epi8(q3, bias))), xh + 64, in, acc, m, 2);
      feed(_mm512_mul_ps(_mm512_set1_ps(d * (float)s[6]), from_i8(_mm_sub_epi8(q4, bias))), xh + 96, in, acc, m, 3);
    }
  }
}

INLINE void q8_k_block(const uint8_t *b, const float *x, size_t in, __m512 *acc, int m) {
  float dv;
  memcpy(&dv, b, 4);
  __m512 d = _mm512_set1_ps(dv);
#pragma GCC unroll 16
  for (int j = 0; j < 256; j += 16)
    feed(_mm512_mul_ps(d, from_i8(_mm_loadu_si128((const __m128i *)(b + 4 + j)))), x + j, in, acc, m, j / 16);
}

/* One weight row (`blocks` blocks of VALUES values in BYTES bytes) against M rows of x. */
#define FUSED_ROW(NAME, VALUES, BYTES, M)                                                          \
  static void NAME##_row_##M(const uint8_t *w, int blocks, const float *x, size_t in, float *y,   \
                             size_t out) {                                                        \
    __m512 acc[M * SLOTS(M)];                                                                     \
    for (int k = 0; k < M * SLOTS(M); k++) acc[k] = _mm512_setzero_ps();                          \
    for (int b = 0; b < blocks; b++) NAME##_block(w + (size_t)b * BYTES, x + (size_t)b * VALUES, in, acc, M); \
    for (int j = 1; j < SLOTS(M); j++)                                                            \
      for (int k = 0; k < M; k++) acc[k] = _mm512_add_ps(acc[k], acc[j * M + k]);                 \
    for (int k = 0; k < M; k++) y[(size_t)k * out] = _mm512_reduce_add_ps(acc[k]);                \
  }
#define FUSED_TYPE(NAME, VALUES, BYTES)                                                            \
  FUSED_ROW(NAME, VALUES, BYTES, 1) FUSED_ROW(NAME, VALUES, BYTES, 2) FUSED_ROW(NAME, VALUES, BYTES, 3)     \
  FUSED_ROW(NAME, VALUES, BYTES, 4) FUSED_ROW(NAME, VALUES, BYTES, 5) FUSED_ROW(NAME, VALUES, BYTES, 6)     \
  FUSED_ROW(NAME, VALUES, BYTES, 7) FUSED_ROW(NAME, VALUES, BYTES, 8)                              \
  static const fused_row NAME##_rows[GROUP + 1] = {0, NAME##_row_1, NAME##_row_2, NAME##_row_3,   \
                                                   NAME##_row_4, NAME##_row_5, NAME##_row_6,      \
                                                   NAME##_row_7, NAME##_row_8};

typedef void (*fused_row)(const uint8_t *, int, const float *, size_t, float *, size_t);
FUSED_TYPE(f32, 32, 128)
FUSED_TYPE(f16, 32, 64)
FUSED_TYPE(bf16, 32, 64)
FUSED_TYPE(q4_0, 32, 18)
FUSED_TYPE(q5_0, 32, 22)
FUSED_TYPE(q8_0, 32, 34)
FUSED_TYPE(q4_k, 256, 144)
FUSED_TYPE(q6_k, 256, 210)
FUSED_TYPE(q8_k, 256, 292)

static const fused_row *fused_rows(int qtype) {
  switch (qtype) {
    case T_F32: return f32_rows;
    case T_F16: return f16_rows;
    case T_BF16: return bf16_rows;
    case T_Q4_0: return q4_0_rows;
    case T_Q5_0: return q5_0_rows;
    case T_Q8_0: return q8_0_rows;
    case T_Q4_K: return q4_k_rows;
    case T_Q6_K: return q6_k_rows;
    case T_Q8_K: return q8_k_rows;
    default: return 0;
  }
}
#else
#define FUSED 0
#endif

int hitrate_quant_fused(void) { return FUSED; }

int hitrate_quant_gemv(int qtype, const uint8_t *w, size_t row_bytes, const float *x, const float *bias, float *y,
                       int rows, int in, int out, int threads) {
  format f;
  if (format_of(qtype, &f) != 0 || in % f.values != 0) return -1;
#if FUSED
  const fused_row *table = fused_rows(qtype);
#endif
  int blocks = in / f.values;
  (void)blocks;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int o = 0; o < out; o++) {
    const uint8_t *wo = w + (size_t)o * row_bytes;
    for (int r = 0; r < rows; r += GROUP) {
      int m = rows - r < GROUP ? rows - r : GROUP;
#if FUSED
      table[m](wo, blocks, x + (size_t)r * in, (size_t)in, y + (size_t)r * out + o, (size_t)out);
#else
      ROWS[m](&f, wo, x + (size_t)r * in, in, y + (size_t)r * out + o, out);
#endif
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

/* ---- 8-bit activations (llama.cpp's way), AVX2 with AVX512-VNNI where there is: each activation
   row is quantized to int8 blocks (one float scale per 256 values for the K types, as ggml's
   Q8_K, or per 32 for Q4_0/Q5_0/Q8_0, as Q8_0), and the weights' integer values meet them in
   integer multiply-adds (vpmaddubsw: unsigned weight bytes times signed activation bytes, pairs
   summed to int16; vpdpwssd: times the block's integer scales, summed to int32), one float
   multiply per block. Each activation moves by at most half its block's step (max |x| / 254), so
   the product differs from the float32 one by at most sum |w_i| * step_i / 2, the error ggml's
   CPU kernels have. ---- */
#if defined(__AVX2__) && defined(__FMA__)
#define INT8_PATH 1
#ifndef INLINE
#include <immintrin.h>
#define INLINE static inline __attribute__((always_inline))
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define DPWSSD(acc, a, b) _mm256_dpwssd_epi32(acc, a, b)
#else
#define DPWSSD(acc, a, b) _mm256_add_epi32(acc, _mm256_madd_epi16(a, b))
#endif

/* One activation row quantized: q [in] int8, d [in / B] float steps, s16 [in / 16] int16 sums. */
static void quantize_row(const float *x, int in, int B, int8_t *q, float *d, int16_t *s16) {
  for (int b = 0; b < in / B; b++) {
    const float *xb = x + (size_t)b * B;
    __m256 amax = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < B; i += 8) amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, _mm256_loadu_ps(xb + i)));
    float m = 0.0f;
    for (int k = 0; k < 8; k++) m = amax[k] > m ? amax[k] : m;
    float step = m / 127.0f, inv = step > 0.0f ? 1.0f / step : 0.0f;
    d[b] = step;
    __m256 vinv = _mm256_set1_ps(inv);
    for (int i = 0; i < B; i += 16) {
      __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + i), vinv)); /* nearest, ties even */
      __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + i + 8), vinv));
      __m256i w = _mm256_packs_epi32(a, c);                   /* 16 int16, lanes interleaved by 128 */
      w = _mm256_permute4x64_epi64(w, 0xD8);                  /* in order */
      __m128i bytes = _mm_packs_epi16(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1));
      _mm_storeu_si128((__m128i *)(q + (size_t)b * B + i), bytes);
      int sum = 0;
      for (int k = 0; k < 16; k++) sum += q[(size_t)b * B + i + k];
      s16[((size_t)b * B + i) / 16] = (int16_t)sum;
    }
  }
}

INLINE float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

/* The activation side of one block for M rows: row k's int8 values at q + k * in, its step at
   d[k * dn], its sums by 16 at s[k * sn]. */
typedef struct {
  const int8_t *q;
  const float *d;
  const int16_t *s;
  size_t in, dn, sn;
} acts;

INLINE void q4_k_q8(const uint8_t *b, acts a, __m256 *accf, float *off, int m) {
  float d = half(b), dmin = half(b + 2);
  int sc[8], mn[8];
  for (int j = 0; j < 8; j++) scale_min_k4(j, b + 4, &sc[j], &mn[j]);
  const uint8_t *qs = b + 16;
  __m256i low = _mm256_set1_epi8(0xF), acc[8];
  for (int k = 0; k < m; k++) acc[k] = _mm256_setzero_si256();
#pragma GCC unroll 4
  for (int c = 0; c < 4; c++) {
    __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
    __m256i lo = _mm256_and_si256(q, low), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), low);
    __m256i s_lo = _mm256_set1_epi16((short)sc[2 * c]), s_hi = _mm256_set1_epi16((short)sc[2 * c + 1]);
    for (int k = 0; k < m; k++) {
      const int8_t *x = a.q + k * a.in + 64 * c;
      acc[k] = DPWSSD(acc[k], _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)x)), s_lo);
      acc[k] = DPWSSD(acc[k], _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 32))), s_hi);
    }
  }
  for (int k = 0; k < m; k++) {
    float dx = a.d[k * a.dn];
    const int16_t *s = a.s + k * a.sn;
    int mins = 0;
    for (int j = 0; j < 8; j++) mins += mn[j] * (s[2 * j] + s[2 * j + 1]);
    accf[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[k]), _mm256_set1_ps(d * dx), accf[k]);
    off[k] += dmin * dx * (float)mins;
  }
}

INLINE void q6_k_q8(const uint8_t *b, acts a, __m256 *accf, float *off, int m) {
  const uint8_t *ql = b, *qh = b + 128;
  const int8_t *sc = (const int8_t *)(b + 192);
  float d = half(b + 208);
  __m256i low = _mm256_set1_epi8(0xF), three = _mm256_set1_epi8(3), acc[8];
  for (int k = 0; k < m; k++) acc[k] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; h++) {
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h));
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(ql + 64 * h + 32));
    __m256i e = _mm256_loadu_si256((const __m256i *)(qh + 32 * h));
    __m256i parts[4] = {_mm256_and_si256(l0, low), _mm256_and_si256(l1, low),
                        _mm256_and_si256(_mm256_srli_epi16(l0, 4), low), _mm256_and_si256(_mm256_srli_epi16(l1, 4), low)};
#pragma GCC unroll 4
    for (int g = 0; g < 4; g++) {
      __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(e, 2 * g), three), 4);
      __m256i q = _mm256_or_si256(parts[g], high); /* q + 32, 0..63 */
      const int8_t *s = sc + 8 * h + 2 * g;
      __m256i sv = _mm256_setr_m128i(_mm_set1_epi16(s[0]), _mm_set1_epi16(s[1]));
      for (int k = 0; k < m; k++) {
        const int8_t *x = a.q + k * a.in + 128 * h + 32 * g;
        acc[k] = DPWSSD(acc[k], _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)x)), sv);
      }
    }
  }
  for (int k = 0; k < m; k++) {
    float dx = a.d[k * a.dn];
    const int16_t *s = a.s + k * a.sn;
    int shift = 0; /* the +32 of every value, times its scale and its activations' sum */
    for (int j = 0; j < 16; j++) shift += sc[j] * s[j];
    accf[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[k]), _mm256_set1_ps(d * dx), accf[k]);
    off[k] += 32.0f * d * dx * (float)shift;
  }
}

/* Q4_0 / Q5_0 (`bits` 4 or 5): unsigned values with the offset 8 or 16 taken off through the sums. */
INLINE void q45_0_q8(const uint8_t *b, int bits, acts a, __m256 *accf, float *off, int m) {
  float d = half(b);
  const uint8_t *qs = b + (bits == 5 ? 6 : 2);
  __m128i raw = _mm_loadu_si128((const __m128i *)qs), low = _mm_set1_epi8(0xF);
  __m256i q = _mm256_setr_m128i(_mm_and_si128(raw, low), _mm_and_si128(_mm_srli_epi16(raw, 4), low));
  if (bits == 5) {
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
    __m256i fifth = _mm256_movm_epi8((__mmask32)qh);
#else
    /* byte j takes byte j / 8 of qh, then tests bit j % 8 */
    __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                         _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    __m256i fifth = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
#endif
    q = _mm256_or_si256(q, _mm256_and_si256(fifth, _mm256_set1_epi8(0x10)));
  }
  __m256i ones = _mm256_set1_epi16(1);
  for (int k = 0; k < m; k++) {
    const int16_t *s = a.s + k * a.sn;
    float dd = d * a.d[k * a.dn];
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(a.q + k * a.in))), ones);
    accf[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dd), accf[k]);
    off[k] += (bits == 5 ? 16.0f : 8.0f) * dd * (float)(s[0] + s[1]);
  }
}

INLINE void q8_0_q8(const uint8_t *b, acts a, __m256 *accf, float *off, int m) {
  (void)off;
  float d = half(b);
  __m256i q = _mm256_loadu_si256((const __m256i *)(b + 2)), aq = _mm256_sign_epi8(q, q), ones = _mm256_set1_epi16(1);
  for (int k = 0; k < m; k++) {
    __m256i x = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(a.q + k * a.in)), q); /* x * sign(q) */
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aq, x), ones);
    accf[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d * a.d[k * a.dn]), accf[k]);
  }
}

INLINE void q4_0_q8(const uint8_t *b, acts a, __m256 *accf, float *off, int m) { q45_0_q8(b, 4, a, accf, off, m); }
INLINE void q5_0_q8(const uint8_t *b, acts a, __m256 *accf, float *off, int m) { q45_0_q8(b, 5, a, accf, off, m); }

#define INT8_ROW(NAME, VALUES, BYTES, M)                                                           \
  static void NAME##_i8_##M(const uint8_t *w, int blocks, acts a, float *y, size_t out) {         \
    __m256 accf[M];                                                                                \
    float off[M];                                                                                  \
    for (int k = 0; k < M; k++) accf[k] = _mm256_setzero_ps(), off[k] = 0.0f;                      \
    for (int b = 0; b < blocks; b++) {                                                             \
      acts ab = {a.q + (size_t)b * VALUES, a.d + b, a.s + (size_t)b * (VALUES / 16), a.in, a.dn, a.sn}; \
      NAME##_q8(w + (size_t)b * BYTES, ab, accf, off, M);                                          \
    }                                                                                              \
    for (int k = 0; k < M; k++) y[(size_t)k * out] = hsum8(accf[k]) - off[k];                     \
  }
#define INT8_TYPE(NAME, VALUES, BYTES)                                                             \
  INT8_ROW(NAME, VALUES, BYTES, 1) INT8_ROW(NAME, VALUES, BYTES, 2) INT8_ROW(NAME, VALUES, BYTES, 3) \
  INT8_ROW(NAME, VALUES, BYTES, 4) INT8_ROW(NAME, VALUES, BYTES, 5) INT8_ROW(NAME, VALUES, BYTES, 6) \
  INT8_ROW(NAME, VALUES, BYTES, 7) INT8_ROW(NAME, VALUES, BYTES, 8)                                \
  static const int8_row NAME##_i8[GROUP + 1] = {0, NAME##_i8_1, NAME##_i8_2, NAME##_i8_3, NAME##_i8_4, \
                                                NAME##_i8_5, NAME##_i8_6, NAME##_i8_7, NAME##_i8_8};

typedef void (*int8_row)(const uint8_t *, int, acts, float *, size_t);
INT8_TYPE(q4_0, 32, 18)
INT8_TYPE(q5_0, 32, 22)
INT8_TYPE(q8_0, 32, 34)
INT8_TYPE(q4_k, 256, 144)
INT8_TYPE(q6_k, 256, 210)

/* The activation block (values per float step) the type's integer kernel takes; 0: none. */
static int int8_block(int qtype, const int8_row **table) {
  switch (qtype) {
    case T_Q4_0: *table = q4_0_i8; return 32;
    case T_Q5_0: *table = q5_0_i8; return 32;
    case T_Q8_0: *table = q8_0_i8; return 32;
    case T_Q4_K: *table = q4_k_i8; return 256;
    case T_Q6_K: *table = q6_k_i8; return 256;
    default: return 0;
  }
}
#else
#define INT8_PATH 0
#endif

/* Whether hitrate_quant_gemv_int8 takes `qtype` in this build. */
int hitrate_quant_int8_supports(int qtype) {
#if INT8_PATH
  const int8_row *table;
  return int8_block(qtype, &table) != 0;
#else
  (void)qtype;
  return 0;
#endif
}

/* As hitrate_quant_gemv with the activations quantized to 8 bits. scratch: at least
   rows * (in + in / 8 + in / 8) bytes (int8 values, float steps, int16 sums by 16). */
int hitrate_quant_gemv_int8(int qtype, const uint8_t *w, size_t row_bytes, const float *x, const float *bias, float *y,
                            int rows, int in, int out, int threads, void *scratch) {
#if INT8_PATH
  const int8_row *table;
  int B = int8_block(qtype, &table);
  if (B == 0 || in % B != 0) return -1;
  int8_t *q = (int8_t *)scratch;
  float *d = (float *)(q + (size_t)rows * in);
  int16_t *s = (int16_t *)(d + (size_t)rows * (in / B));
  for (int r = 0; r < rows; r++)
    quantize_row(x + (size_t)r * in, in, B, q + (size_t)r * in, d + (size_t)r * (in / B), s + (size_t)r * (in / 16));
  int blocks = in / B;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int o = 0; o < out; o++) {
    const uint8_t *wo = w + (size_t)o * row_bytes;
    for (int r = 0; r < rows; r += GROUP) {
      int m = rows - r < GROUP ? rows - r : GROUP;
      acts a = {q + (size_t)r * in, d + (size_t)r * blocks, s + (size_t)r * (in / 16), (size_t)in, (size_t)blocks,
                (size_t)(in / 16)};
      table[m](wo, blocks, a, y + (size_t)r * out + o, (size_t)out);
    }
    if (bias)
      for (int r = 0; r < rows; r++) y[(size_t)r * out + o] += bias[o];
  }
  return 0;
#else
  (void)qtype, (void)w, (void)row_bytes, (void)x, (void)bias, (void)y, (void)rows, (void)in, (void)out, (void)threads,
      (void)scratch;
  return -1;
#endif
}
