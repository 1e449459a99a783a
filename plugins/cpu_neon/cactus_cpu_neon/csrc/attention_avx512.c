/* Decode attention on AVX-512, and on AVX2 + FMA + F16C without it (x86 only; stubs
 * elsewhere).
 *
 * attention.c's row path is NEON source: through SIMDe each 16 float16 keys
 * widen in four 128-bit converts and a score is a 4-lane dot reduced pairwise,
 * so one Qwen3-0.6B layer's decode attention (16 query heads over 8 KV heads
 * of 128, ~100 cached positions) took ~48 us, ~1.3 ms of a 128-token
 * generation's step; as the context grows it grows with it.  Here a key row
 * is widened 16 values per vcvtph2ps and met by every query head of its group
 * while it is in registers; the weighted sum of values keeps a 64-wide slice of
 * up to four heads' outputs in registers over all keys.  The summation order
 * differs from the NEON kernel (16 lanes, then one reduction), so results
 * match it within rounding, not bit for bit; numpy_ref is the reference either
 * way (tests/cpu_neon: the conformance suite, test_kernels.py, neon_harness.c).
 * Any d (a masked tail), float16 or float32 K/V. */
#include "neon_common.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

int cn_attn_avx512_available(void) { return 1; }

/* 16 K/V values from element i of a row (masked: lanes past d read nothing, give 0). */
CN_INLINE __m512 load16(const void *row, int64_t i, __mmask16 m, const int kt) {
    if (kt == CN_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + i));
    return _mm512_maskz_loadu_ps(m, (const float *)row + i);
}

CN_INLINE __mmask16 lanes(int64_t left) { return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1); }

/* The sums of four accumulators' lanes, as one vector. */
CN_INLINE __m128 sum4(__m512 a0, __m512 a1, __m512 a2, __m512 a3) {
#define HALVES(a) \
    _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)))
    const __m256 x = _mm256_hadd_ps(HALVES(a0), HALVES(a1)), y = _mm256_hadd_ps(HALVES(a2), HALVES(a3));
#undef HALVES
    const __m256 z = _mm256_hadd_ps(x, y); /* a0..a3 over lanes 0-3, then over lanes 4-7 */
    return _mm_add_ps(_mm256_castps256_ps128(z), _mm256_extractf128_ps(z, 1));
}

/* Scores of gn (1..4) query heads against keys [0, n), four keys at a time so
 * that one shuffle tree reduces 4 dot products (full: d % 16 == 0, no masks). */
CN_INLINE void scores(const float *const *qr, int64_t n, int64_t d, const char *kb, const char *vb, size_t es,
                      float scale, float *p, int64_t S, const int gn, const int kt, const int full) {
    int64_t j = 0;
    const size_t rows4 = (size_t)(4 * d) * es;
    for (; j + 4 <= n; j += 4) {
        const char *k = kb + (size_t)(j * d) * es;
        /* In decode the cache comes from DRAM (the weights streamed since its last
         * use evicted it) in short per-head runs the hardware prefetcher barely
         * ramps up on: fetch the keys four steps ahead, and these keys' values for
         * the weighted sum after the softmax, while the dot products compute. */
        for (size_t b = 0; b < rows4; b += 64) {
            __builtin_prefetch(k + 4 * rows4 + b, 0, 3);
            __builtin_prefetch(vb + (size_t)(j * d) * es + b, 0, 3);
        }
        __m512 acc[4][4];
#pragma GCC unroll 16
        for (int g = 0; g < gn; g++)
            for (int i = 0; i < 4; i++) acc[g][i] = _mm512_setzero_ps();
        for (int64_t t = 0; t < d; t += 16) {
            const __mmask16 m = full ? (__mmask16)0xffff : lanes(d - t);
            __m512 kv[4];
#pragma GCC unroll 4
            for (int i = 0; i < 4; i++) kv[i] = load16(k + (size_t)(i * d) * es, t, m, kt);
#pragma GCC unroll 4
            for (int g = 0; g < gn; g++) {
                const __m512 qv = _mm512_maskz_loadu_ps(m, qr[g] + t);
#pragma GCC unroll 4
                for (int i = 0; i < 4; i++) acc[g][i] = _mm512_fmadd_ps(qv, kv[i], acc[g][i]);
            }
        }
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++)
            _mm_storeu_ps(p + g * S + j,
                          _mm_mul_ps(sum4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]), _mm_set1_ps(scale)));
    }
    for (; j < n; j++) {
        const char *k = kb + (size_t)(j * d) * es;
        __m512 acc[4];
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) acc[g] = _mm512_setzero_ps();
        for (int64_t t = 0; t < d; t += 16) {
            const __mmask16 m = lanes(d - t);
            const __m512 kv = load16(k, t, m, kt);
#pragma GCC unroll 4
            for (int g = 0; g < gn; g++) acc[g] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qr[g] + t), kv, acc[g]);
        }
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) p[g * S + j] = _mm512_reduce_add_ps(acc[g]) * scale;
    }
}

/* o_g[t0, t0 + 64) += sum_j p_g[j] v_j[t0, t0 + 64) for gn (1..4) heads, over keys [0, n). */
CN_INLINE void values(float *const *orow, int64_t n, int64_t d, int64_t t0, const char *vb, size_t es,
                      const float *p, int64_t S, const int gn, const int kt, const int full) {
    __mmask16 m[4];
    __m512 o[4][4];
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++) {
        const int64_t left = d - t0 - 16 * c;
        m[c] = full ? (__mmask16)0xffff : left > 0 ? lanes(left) : 0;
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) o[g][c] = _mm512_maskz_loadu_ps(m[c], orow[g] + t0 + 16 * c);
    }
    for (int64_t j = 0; j < n; j++) {
        const char *v = vb + (size_t)(j * d) * es;
        __m512 w[4];
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) w[g] = _mm512_set1_ps(p[g * S + j]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            const __m512 vv = load16(v, t0 + 16 * c, m[c], kt); /* an empty mask loads nothing */
#pragma GCC unroll 4
            for (int g = 0; g < gn; g++) o[g][c] = _mm512_fmadd_ps(w[g], vv, o[g][c]);
        }
    }
#pragma GCC unroll 4
    for (int c = 0; c < 4; c++)
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) _mm512_mask_storeu_ps(orow[g] + t0 + 16 * c, m[c], o[g][c]);
}

#define BY_HEADS(call) \
    switch (gn) { \
    case 1: call(1); break; \
    case 2: call(2); break; \
    case 3: call(3); break; \
    default: call(4); break; \
    }

void cn_attn_scores_avx512(const float *const *qr, int64_t G, const void *kb, const void *vb, int kt, int64_t n,
                           int64_t d, float scale, float *p, int64_t S) {
    const size_t es = kt == CN_F16 ? 2 : 4;
    const int full = d % 16 == 0;
    for (int64_t g0 = 0; g0 < G; g0 += 4) {
        const int gn = (int)CN_MIN(4, G - g0);
#define SCORES(GN) \
    kt == CN_F16 ? (full ? scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, GN, CN_F16, 1) \
                         : scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, GN, CN_F16, 0)) \
                 : scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, GN, CN_F32, 0)
        BY_HEADS(SCORES)
#undef SCORES
    }
}

void cn_attn_values_avx512(float *const *orow, int64_t G, const void *vb, int kt, int64_t n, int64_t d,
                           const float *p, int64_t S) {
    const size_t es = kt == CN_F16 ? 2 : 4;
    for (int64_t g0 = 0; g0 < G; g0 += 4) {
        const int gn = (int)CN_MIN(4, G - g0);
        for (int64_t t0 = 0; t0 < d; t0 += 64) {
            const int full = d - t0 >= 64;
#define VALUES(GN) \
    kt == CN_F16 ? (full ? values(orow + g0, n, d, t0, vb, es, p + g0 * S, S, GN, CN_F16, 1) \
                         : values(orow + g0, n, d, t0, vb, es, p + g0 * S, S, GN, CN_F16, 0)) \
                 : values(orow + g0, n, d, t0, vb, es, p + g0 * S, S, GN, CN_F32, 0)
            BY_HEADS(VALUES)
#undef VALUES
        }
    }
}

#elif !CN_NATIVE && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* AVX2 + FMA + F16C without AVX-512: the same two entry points at 8 lanes (session 17).
 * SIMDe runs the NEON row path on 128-bit registers, one F16C convert per 4 keys'
 * values and a pairwise reduction per 4 keys; on the Zen 3 pair a Qwen3-0.6B layer's decode
 * attention grew by 0.41 us per cached key.  Two query heads per pass (8 accumulators,
 * 4 keys and a query: 13 of the 16 ymm registers), a 32-wide output slice per pass in the
 * weighted sum, and scalar code for d % 8. */
#include "avx2_common.h"

int cn_attn_avx512_available(void) { return 1; }

CN_INLINE __m256 load8(const void *row, int64_t i, const int kt) {
    if (kt == CN_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + i)));
    return _mm256_loadu_ps((const float *)row + i);
}

CN_INLINE float load1(const void *row, int64_t i, const int kt) {
    return kt == CN_F16 ? _cvtsh_ss(((const uint16_t *)row)[i]) : ((const float *)row)[i];
}

/* The sums of four accumulators' lanes, as one vector. */
CN_INLINE __m128 sum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    const __m256 z = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(z), _mm256_extractf128_ps(z, 1));
}

CN_INLINE void scores(const float *const *qr, int64_t n, int64_t d, const char *kb, const char *vb, size_t es,
                      float scale, float *p, int64_t S, const int gn, const int kt) {
    const int64_t d8 = d & ~(int64_t)7;
    const size_t rows4 = (size_t)(4 * d) * es;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const char *k = kb + (size_t)(j * d) * es;
        for (size_t b = 0; b < rows4; b += 64) { /* as on AVX-512: the cache comes from DRAM */
            __builtin_prefetch(k + 4 * rows4 + b, 0, 3);
            __builtin_prefetch(vb + (size_t)(j * d) * es + b, 0, 3);
        }
        __m256 acc[2][4];
        for (int g = 0; g < gn; g++)
            for (int i = 0; i < 4; i++) acc[g][i] = _mm256_setzero_ps();
        for (int64_t t = 0; t < d8; t += 8) {
            __m256 kv[4];
            for (int i = 0; i < 4; i++) kv[i] = load8(k + (size_t)(i * d) * es, t, kt);
            for (int g = 0; g < gn; g++) {
                const __m256 qv = _mm256_loadu_ps(qr[g] + t);
                for (int i = 0; i < 4; i++) acc[g][i] = _mm256_fmadd_ps(qv, kv[i], acc[g][i]);
            }
        }
        for (int g = 0; g < gn; g++) {
            __m128 s = sum4(acc[g][0], acc[g][1], acc[g][2], acc[g][3]);
            if (d8 < d) {
                float tail[4] = {0, 0, 0, 0};
                for (int i = 0; i < 4; i++)
                    for (int64_t t = d8; t < d; t++) tail[i] += qr[g][t] * load1(k + (size_t)(i * d) * es, t, kt);
                s = _mm_add_ps(s, _mm_loadu_ps(tail));
            }
            _mm_storeu_ps(p + g * S + j, _mm_mul_ps(s, _mm_set1_ps(scale)));
        }
    }
    for (; j < n; j++) {
        const char *k = kb + (size_t)(j * d) * es;
        for (int g = 0; g < gn; g++) {
            __m256 acc = _mm256_setzero_ps();
            for (int64_t t = 0; t < d8; t += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(qr[g] + t), load8(k, t, kt), acc);
            float s = hsum8(acc);
            for (int64_t t = d8; t < d; t++) s += qr[g][t] * load1(k, t, kt);
            p[g * S + j] = s * scale;
        }
    }
}

/* o_g[t0, t0 + 8 nc) += sum_j p_g[j] v_j[t0, t0 + 8 nc) for gn (1, 2) heads, over keys [0, n). */
CN_INLINE void values(float *const *orow, int64_t n, int64_t d, int64_t t0, const char *vb, size_t es,
                      const float *p, int64_t S, const int gn, const int nc, const int kt) {
    __m256 o[2][4];
    for (int g = 0; g < gn; g++)
        for (int c = 0; c < nc; c++) o[g][c] = _mm256_loadu_ps(orow[g] + t0 + 8 * c);
    for (int64_t j = 0; j < n; j++) {
        const char *v = vb + (size_t)(j * d) * es;
        __m256 w[2];
        for (int g = 0; g < gn; g++) w[g] = _mm256_set1_ps(p[g * S + j]);
        for (int c = 0; c < nc; c++) {
            const __m256 vv = load8(v, t0 + 8 * c, kt);
            for (int g = 0; g < gn; g++) o[g][c] = _mm256_fmadd_ps(w[g], vv, o[g][c]);
        }
    }
    for (int g = 0; g < gn; g++)
        for (int c = 0; c < nc; c++) _mm256_storeu_ps(orow[g] + t0 + 8 * c, o[g][c]);
}

void cn_attn_scores_avx512(const float *const *qr, int64_t G, const void *kb, const void *vb, int kt, int64_t n,
                           int64_t d, float scale, float *p, int64_t S) {
    const size_t es = kt == CN_F16 ? 2 : 4;
    for (int64_t g0 = 0; g0 < G; g0 += 2) {
        const int two = G - g0 >= 2;
        if (kt == CN_F16) two ? scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, 2, CN_F16)
                              : scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, 1, CN_F16);
        else two ? scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, 2, CN_F32)
                 : scores(qr + g0, n, d, kb, vb, es, scale, p + g0 * S, S, 1, CN_F32);
    }
}

void cn_attn_values_avx512(float *const *orow, int64_t G, const void *vb, int kt, int64_t n, int64_t d,
                           const float *p, int64_t S) {
    const size_t es = kt == CN_F16 ? 2 : 4;
    const int64_t d8 = d & ~(int64_t)7;
    for (int64_t g0 = 0; g0 < G; g0 += 2) {
        const int gn = G - g0 >= 2 ? 2 : 1;
        for (int64_t t0 = 0; t0 < d8; t0 += 32) {
            const int nc = (int)CN_MIN(4, (d8 - t0) / 8);
#define VALUES(GN, NC) \
    kt == CN_F16 ? values(orow + g0, n, d, t0, vb, es, p + g0 * S, S, GN, NC, CN_F16) \
                 : values(orow + g0, n, d, t0, vb, es, p + g0 * S, S, GN, NC, CN_F32)
            if (gn == 2) {
                if (nc == 4) VALUES(2, 4); else if (nc == 3) VALUES(2, 3); else if (nc == 2) VALUES(2, 2); else VALUES(2, 1);
            } else {
                if (nc == 4) VALUES(1, 4); else if (nc == 3) VALUES(1, 3); else if (nc == 2) VALUES(1, 2); else VALUES(1, 1);
            }
#undef VALUES
        }
        for (int g = g0; g < g0 + gn; g++) /* d % 8 */
            for (int64_t t = d8; t < d; t++) {
                float acc = orow[g][t];
                for (int64_t j = 0; j < n; j++) acc += p[g * S + j] * load1(vb, j * d + t, kt);
                orow[g][t] = acc;
            }
    }
}

#else

int cn_attn_avx512_available(void) { return 0; }
void cn_attn_scores_avx512(const float *const *qr, int64_t G, const void *kb, const void *vb, int kt, int64_t n,
                           int64_t d, float scale, float *p, int64_t S) {
    (void)qr, (void)G, (void)kb, (void)kt, (void)n, (void)d, (void)scale, (void)p, (void)S;
}
void cn_attn_values_avx512(float *const *orow, int64_t G, const void *vb, int kt, int64_t n, int64_t d,
                           const float *p, int64_t S) {
    (void)orow, (void)G, (void)vb, (void)kt, (void)n, (void)d, (void)p, (void)S;
}

#endif
