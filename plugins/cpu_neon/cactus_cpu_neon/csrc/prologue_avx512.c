/* The preparation of x for a CQ decode on AVX-512: the Hadamard rotation
 * (cn_fwht_block) and the int8 quantization of the int8-activation decode
 * (cq_i8.c's quantize_x).
 *
 * Both run on the calling thread before every CQ projection's parallel
 * region, four times per decoder block, while the other threads wait.
 * Through SIMDe's 128-bit emulation they cost ~0.7 us (rotation) and
 * ~1.8 us (quantization) per 1024 values on the 2-core EPYC: ~18 us of a
 * Qwen3-0.6B block's ~340 (docs/cpu_neon.md, Session 7).  Here a 16-float
 * vector does the first four butterfly stages in registers, and the
 * quantization deinterleaves a vector's components with two-source permutes
 * and narrows with one saturating convert.
 *
 * Both give the NEON code's results bit for bit: each butterfly output is the
 * same single rounding of a + b or a - b (an FMA with a +-1 factor rounds
 * once, as an add does), stages run in the same order and the scale is one
 * multiply after the last stage; the quantization multiplies by the same
 * 127 / amax and rounds to nearest even (the default MXCSR mode, as NEON's
 * vcvtnq), and an int8 saturation equals NEON's two narrowing ones.
 * Compiled only where the compiler targets AVX-512 (else the NEON code runs). */
#include "neon_common.h"

#if defined(__AVX512F__)
#include <immintrin.h>

/* Strides 1, 2, 4 and 8 of one 16-float vector: each butterfly as partner + a * (+-1). */
CN_INLINE __m512 fwht16(__m512 a) {
    const __m512 m1 = _mm512_setr_ps(1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1, 1, -1);
    const __m512 m2 = _mm512_setr_ps(1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1, 1, 1, -1, -1);
    const __m512 m4 = _mm512_setr_ps(1, 1, 1, 1, -1, -1, -1, -1, 1, 1, 1, 1, -1, -1, -1, -1);
    const __m512 m8 = _mm512_setr_ps(1, 1, 1, 1, 1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1);
    a = _mm512_fmadd_ps(a, m1, _mm512_permute_ps(a, 0xb1));              /* pairs swapped */
    a = _mm512_fmadd_ps(a, m2, _mm512_permute_ps(a, 0x4e));              /* halves of each 4 swapped */
    a = _mm512_fmadd_ps(a, m4, _mm512_shuffle_f32x4(a, a, 0xb1));        /* 128-bit lanes 1 0 3 2 */
    return _mm512_fmadd_ps(a, m8, _mm512_shuffle_f32x4(a, a, 0x4e));     /* lanes 2 3 0 1 */
}

/* The stages of stride 16 and up of a block whose 16-float vectors are done, the last with the scale. */
CN_INLINE void fwht_wide(float *v, int64_t bs) {
    for (int64_t h = 16; h < bs / 2; h *= 2)
        for (int64_t i = 0; i < bs; i += 2 * h)
            for (int64_t j = i; j < i + h; j += 16) {
                const __m512 a = _mm512_loadu_ps(v + j), b = _mm512_loadu_ps(v + j + h);
                _mm512_storeu_ps(v + j, _mm512_add_ps(a, b));
                _mm512_storeu_ps(v + j + h, _mm512_sub_ps(a, b));
            }
    /* The last stage with the scale: (a + b) rounded, then times the scale, as two passes would. */
    const __m512 scale = _mm512_set1_ps(1.0f / sqrtf((float)bs));
    for (int64_t j = 0; j < bs / 2; j += 16) {
        const __m512 a = _mm512_loadu_ps(v + j), b = _mm512_loadu_ps(v + j + bs / 2);
        _mm512_storeu_ps(v + j, _mm512_mul_ps(_mm512_add_ps(a, b), scale));
        _mm512_storeu_ps(v + j + bs / 2, _mm512_mul_ps(_mm512_sub_ps(a, b), scale));
    }
}

int cn_fwht_avx512(float *v, int64_t bs) {
    if (bs < 32 || bs & (bs - 1)) return 0;
    for (int64_t i = 0; i < bs; i += 16) _mm512_storeu_ps(v + i, fwht16(_mm512_loadu_ps(v + i)));
    fwht_wide(v, bs);
    return 1;
}

int cn_rotate_avx512(const float *x, const float *signs, int64_t K, int64_t bs, float *out) {
    if (bs < 32 || bs & (bs - 1) || K % bs) return 0;
    for (int64_t b = 0; b < K; b += bs) {
        for (int64_t i = b; i < b + bs; i += 16)
            _mm512_storeu_ps(out + i, fwht16(_mm512_mul_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(signs + i))));
        fwht_wide(out + b, bs);
    }
    return 1;
}

/* Component e's values of codes c..c+15 (d-vectors from p = x + d c). */
CN_INLINE __m512 component16(const float *p, const int d, int e) {
    if (d == 1) return _mm512_loadu_ps(p);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    if (d == 2) return _mm512_permutex2var_ps(_mm512_loadu_ps(p), e ? odd : even, _mm512_loadu_ps(p + 16));
    /* d == 4: components e and e + 2 of codes are the even / odd of pairs (e & 1) */
    const __m512 lo = _mm512_permutex2var_ps(_mm512_loadu_ps(p), e & 1 ? odd : even, _mm512_loadu_ps(p + 16));
    const __m512 hi = _mm512_permutex2var_ps(_mm512_loadu_ps(p + 32), e & 1 ? odd : even, _mm512_loadu_ps(p + 48));
    return _mm512_permutex2var_ps(lo, e & 2 ? odd : even, hi);
}

CN_INLINE void quantize_groups(const float *x, int64_t K, int64_t group, const int d, float cb_scale, int8_t *xq,
                               float *xf, int32_t *xsum) {
    const int64_t C = group / d, nch = (C + 63) / 64;
    for (int64_t g = 0; g < K / group; g++) {
        const float *xg = x + g * group;
        __m512 m = _mm512_setzero_ps();
        for (int64_t i = 0; i < group; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(xg + i)));
        const float amax = _mm512_reduce_max_ps(m);
        const __m512 inv = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
        xf[g] = amax / 127.0f * cb_scale;
        int8_t *dst = xq + g * nch * 64 * d;
        if (C % 64) memset(dst, 0, (size_t)(nch * 64 * d));
        __m512i sum = _mm512_setzero_si512();
        for (int64_t c = 0; c < C; c += 16) {
            int8_t *o = dst + (c / 64) * 64 * d + c % 64; /* component e at o + 64 e */
            for (int e = 0; e < d; e++) {
                const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(component16(xg + d * c, d, e), inv));
                sum = _mm512_add_epi32(sum, q);
                _mm_storeu_si128((__m128i *)(void *)(o + 64 * e), _mm512_cvtsepi32_epi8(q));
            }
        }
        xsum[g] = _mm512_reduce_add_epi32(sum);
    }
}

int cn_cq_quantize_x_avx512(const float *x, int64_t K, int64_t group, int d, float cb_scale, int8_t *xq, float *xf,
                            int32_t *xsum) {
    if (group % (16 * d)) return 0; /* whole vectors of each component */
    if (d == 1) quantize_groups(x, K, group, 1, cb_scale, xq, xf, xsum);
    else if (d == 2) quantize_groups(x, K, group, 2, cb_scale, xq, xf, xsum);
    else if (d == 4) quantize_groups(x, K, group, 4, cb_scale, xq, xf, xsum);
    else return 0;
    return 1;
}

/* neon_common.h's cn_exp as the x86 (SIMDe) build computes it, operation
 * for operation (min / max take the constant first, so a NaN passes through
 * as NEON's do). */
CN_INLINE __m512 exp16(__m512 x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.6f), _CMP_LT_OQ);
    const __mmask16 huge = _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.72f), _CMP_GT_OQ);
    x = _mm512_max_ps(_mm512_set1_ps(-86.6f), _mm512_min_ps(_mm512_set1_ps(88.72f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    /* vfmsq: SIMDe's (the x86 build's) rounds the product first, native NEON's is
     * fused; an explicit rounding keeps the compiler from contracting it into an FMA */
    const int near = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    __m512 r = _mm512_sub_ps(x, _mm512_mul_round_ps(n, _mm512_set1_ps(0.693359375f), near));
    r = _mm512_sub_ps(r, _mm512_mul_round_ps(n, _mm512_set1_ps(-2.12194440e-4f), near));
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvttps_epi32(n), _mm512_set1_epi32(126)), 23);
    __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, _mm512_castsi512_ps(e)), _mm512_set1_ps(2.0f));
    y = _mm512_mask_blend_ps(huge, y, _mm512_set1_ps(INFINITY));
    return _mm512_mask_blend_ps(tiny, y, _mm512_setzero_ps());
}

int64_t cn_silu_avx512(const float *x, const float *up, float *out, int64_t n) {
    const __m512i sign = _mm512_set1_epi32(INT32_MIN);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 e = exp16(_mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign))); /* of -v */
        __m512 y = _mm512_div_ps(v, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        if (up) y = _mm512_mul_ps(y, _mm512_loadu_ps(up + i));
        _mm512_storeu_ps(out + i, y);
    }
    return i;
}

#else

int64_t cn_silu_avx512(const float *x, const float *up, float *out, int64_t n) {
    (void)x, (void)up, (void)out, (void)n;
    return 0;
}
int cn_fwht_avx512(float *v, int64_t bs) {
    (void)v, (void)bs;
    return 0;
}
int cn_rotate_avx512(const float *x, const float *signs, int64_t K, int64_t bs, float *out) {
    (void)x, (void)signs, (void)K, (void)bs, (void)out;
    return 0;
}
int cn_cq_quantize_x_avx512(const float *x, int64_t K, int64_t group, int d, float cb_scale, int8_t *xq, float *xf,
                            int32_t *xsum) {
    (void)x, (void)K, (void)group, (void)d, (void)cb_scale, (void)xq, (void)xf, (void)xsum;
    return 0;
}

#endif
