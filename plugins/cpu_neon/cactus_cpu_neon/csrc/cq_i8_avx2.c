/* CQ4 decode (4-bit codes of scalars: the 16-level Lloyd-Max codebook) with
 * int8 activations on AVX2, for x86 without AVX-512 VBMI.
 *
 * cq_i8.c has the design.  Without VBMI, x86's only byte table lookup is
 * pshufb's 16 entries: too few for CQ3's 64 or the 256 of 2-vector codes,
 * exactly enough for 4-bit codes.  A 32-byte load holds 64 codes, the low
 * nibbles the even inputs' and the high nibbles the odd inputs'; x's int8
 * layout (cn_cq_i8_xdim) keeps even and odd inputs apart, so each nibble
 * plane meets its x with no shuffle.  64 weights cost two masks, a shift,
 * two pshufb, two pmaddubsw and two pmaddwd.
 *
 * pmaddubsw multiplies unsigned by signed bytes into saturating int16 pairs.
 * The codebook is quantized to [-63, 63] (cn_cq_i8_cb_limit) and looked up
 * as q + 64 in [1, 127], so a pair is at most 2 x 127 x 127 = 32258 and never
 * saturates; 64 x sum(x) per group, shared by every row, takes the offset
 * back out.  The codebook's 7-bit rounding is at most 1/126 of its largest
 * level, a tenth of the 4-bit code's own error.
 *
 * Compiled where the compiler targets AVX2 + FMA + F16C; AVX-512 builds use
 * it too (cq_vbmi.c has no 4-bit path). */
#include "neon_common.h"

#if !CN_NATIVE && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

int cn_cq_i8_avx2_usable(int bits, int d) { return bits == 4 && d == 1; }

/* Prefetch distances, as in cq_vbmi.c (docs/cpu_neon.md, Sessions 7 and 9). */
#define PF_L1 4096
#define PF_L2 16384

/* 64 weights: 32 code bytes at c, x's even inputs at x, odd inputs at x + 64. */
CN_INLINE __m256i step64(__m256i acc, __m256i tbl, __m256i c, const int8_t *x) {
    const __m256i m = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m256i lo = _mm256_and_si256(c, m), hi = _mm256_and_si256(_mm256_srli_epi16(c, 4), m);
    const __m256i pl = _mm256_maddubs_epi16(_mm256_shuffle_epi8(tbl, lo), _mm256_loadu_si256((const __m256i *)x));
    const __m256i ph = _mm256_maddubs_epi16(_mm256_shuffle_epi8(tbl, hi), _mm256_loadu_si256((const __m256i *)(x + 64)));
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(pl, ones), _mm256_madd_epi16(ph, ones)));
}

CN_INLINE float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* Row n, any group (a multiple of 4 inputs: code bytes per group even).  A
 * step shorter than 32 bytes reads its codes through a zeroed buffer: never
 * past the group, and the zero codes meet zero x. */
CN_INLINE float row_any(const cn_cq_i8_args *a, __m256i tbl, int64_t n) {
    const int64_t ng = a->K / a->group, C = a->group / 2; /* code bytes (input pairs) per group */
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * ng;
    __m256 tot = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t g = 0; g < ng; g++) {
        __m256i acc = _mm256_setzero_si256();
        for (int64_t c = 0; c < C; c += 32) {
            const uint8_t *p = row + g * C + c;
            __m256i codes;
            if (C - c >= 32) {
                codes = _mm256_loadu_si256((const __m256i *)p);
            } else {
                uint8_t buf[32] = {0};
                memcpy(buf, p, (size_t)(C - c));
                codes = _mm256_loadu_si256((const __m256i *)buf);
            }
            acc = step64(acc, tbl, codes, a->xq + (g * a->nch + c / 64) * 128 + c % 64);
        }
        const float f = _cvtsh_ss(sc[g]) * a->xf[g];
        tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(f), tot);
        off += f * (float)a->xsum[g];
    }
    return hsum8(tot) - 64.0f * off + (a->bias ? a->bias[n] : 0.0f);
}

/* Groups of 128, every CQ4 model of a power-of-two width: one cache line of
 * codes and one 128-byte chunk of x per group. */
CN_INLINE float row_g128(const cn_cq_i8_args *a, __m256i tbl, int64_t n) {
    const int64_t ng = a->K / 128;
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * ng;
    __m256 tot = _mm256_setzero_ps();
    float off = 0.0f;
    for (int64_t g = 0; g < ng; g++) {
        const uint8_t *p = row + 64 * g;
        const int8_t *x = a->xq + 128 * g;
        _mm_prefetch((const char *)(p + PF_L1), _MM_HINT_T0);
        _mm_prefetch((const char *)(p + PF_L2), _MM_HINT_T1);
        __m256i acc = step64(_mm256_setzero_si256(), tbl, _mm256_loadu_si256((const __m256i *)p), x);
        acc = step64(acc, tbl, _mm256_loadu_si256((const __m256i *)(p + 32)), x + 32);
        const float f = _cvtsh_ss(sc[g]) * a->xf[g];
        tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(f), tot);
        off += f * (float)a->xsum[g];
    }
    return hsum8(tot) - 64.0f * off + (a->bias ? a->bias[n] : 0.0f);
}

void cn_cq_i8_avx2_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    int8_t t[16];
    for (int i = 0; i < 16; i++) t[i] = (int8_t)(a->cbq[i] + 64); /* |q| <= 63: in [1, 127] */
    const __m256i tbl = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)t));
    if (a->group == 128)
        for (int64_t n = n0; n < n1; n++) a->y[n] = row_g128(a, tbl, n);
    else
        for (int64_t n = n0; n < n1; n++) a->y[n] = row_any(a, tbl, n);
}

#else

int cn_cq_i8_avx2_usable(int bits, int d) {
    (void)bits, (void)d;
    return 0;
}
void cn_cq_i8_avx2_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) { (void)a, (void)n0, (void)n1; }

#endif
