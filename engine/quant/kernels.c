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
