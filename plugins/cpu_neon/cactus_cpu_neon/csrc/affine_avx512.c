/* int4 / int8 decode (matrix-vector) on AVX-512.
 *
 * affine.c widens each unsigned code to float32 through zips with zero, the
 * fast route on NEON and through SIMDe; on x86 that is six 128-bit shuffles
 * and four converts per 16 codes.  AVX-512 widens 16 bytes to 16 int32 in one
 * load-and-extend, so a weight costs about one instruction in sixteen of each
 * kind.  The arithmetic is affine.c's: per group, scale * dot(q, x) plus
 * bias * sum(x) with the sums shared by every row (computed by the caller);
 * int4 pairs the low nibbles with x's even elements and the high nibbles with
 * its odd ones (xe, xo, split by the caller), so bytes are used as stored.
 * Compiled only where the compiler targets AVX-512 (else affine.c's NEON). */
#include "neon_common.h"

#if defined(__AVX512F__)
#include <immintrin.h>

int cn_affine_avx512_usable(int bits, int64_t group) { return (bits == 8 || bits == 4) && group % 32 == 0; }

CN_INLINE __m512 u8x16(const uint8_t *p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p)));
}

void cn_affine_gemv_avx512(const float *x, const float *xe, const float *xo, const float *xsum, int64_t K,
                           const uint8_t *codes, int bits, const uint16_t *scales, const uint16_t *biases,
                           int64_t group, const float *bias, float *y, int64_t n0, int64_t n1) {
    const int64_t ng = K / group, stride = K * bits / 8;
    const __m512i low4 = _mm512_set1_epi32(15);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = codes + n * stride;
        __m512 tot = _mm512_setzero_ps();
        float off = bias ? bias[n] : 0.0f;
        for (int64_t g = 0; g < ng; g++) {
            __m512 a0 = _mm512_setzero_ps(), a1 = a0;
            if (bits == 8) {
                for (int64_t i = g * group; i < (g + 1) * group; i += 32) {
                    a0 = _mm512_fmadd_ps(u8x16(row + i), _mm512_loadu_ps(x + i), a0);
                    a1 = _mm512_fmadd_ps(u8x16(row + i + 16), _mm512_loadu_ps(x + i + 16), a1);
                }
            } else {
                for (int64_t j = g * group / 2; j < (g + 1) * group / 2; j += 16) { /* 16 bytes, 32 weights */
                    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(row + j)));
                    a0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_and_si512(b, low4)), _mm512_loadu_ps(xe + j), a0);
                    a1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(b, 4)), _mm512_loadu_ps(xo + j), a1);
                }
            }
            tot = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(_cvtsh_ss(scales[n * ng + g])), tot);
            off += _cvtsh_ss(biases[n * ng + g]) * xsum[g];
        }
        y[n] = _mm512_reduce_add_ps(tot) + off;
    }
}

#else

int cn_affine_avx512_usable(int bits, int64_t group) {
    (void)bits, (void)group;
    return 0;
}
void cn_affine_gemv_avx512(const float *x, const float *xe, const float *xo, const float *xsum, int64_t K,
                           const uint8_t *codes, int bits, const uint16_t *scales, const uint16_t *biases,
                           int64_t group, const float *bias, float *y, int64_t n0, int64_t n1) {
    (void)x, (void)xe, (void)xo, (void)xsum, (void)K, (void)codes, (void)bits, (void)scales, (void)biases;
    (void)group, (void)bias, (void)y, (void)n0, (void)n1;
}

#endif
