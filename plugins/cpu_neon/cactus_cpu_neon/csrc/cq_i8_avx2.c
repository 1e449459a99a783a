/* CQ4 decode (4-bit codes of scalars: the 16-level Lloyd-Max codebook), its
 * widened tensors' and the cq5 / cq6 heads' (5- and 6-bit codes of scalars)
 * and CQ3's (6-bit codes of 2-vectors) with int8 activations on AVX2, for x86
 * without AVX-512 VBMI.
 *
 * cq_i8.c has the design.  Without VBMI, x86's only byte table lookup is
 * pshufb's 16 entries: exactly enough for 4-bit codes; 64 entries (6-bit
 * codes) take four lookups and three blends, and 256 (8-bit codes) too many.  A 32-byte load holds 64 codes, the low
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
 * The cq6 head's 64 levels need their 8 bits (its levels are 6-bit fine), so
 * there the codebook stays in [-127, 127] and the sign trick makes the
 * product fit: pmaddubsw(|w|, x * sign(w)).  32 weights cost the 6-bit
 * unpack (a shuffle and seven shifts and masks), four pshufb and three blends
 * for the 64 entries, abs, sign, pmaddubsw and pmaddwd.  On equally spaced levels
 * (the cq6 head convert writes since session 13) the lookup goes: rows6_uniform.
 *
 * Compiled where the compiler targets AVX2 + FMA + F16C; AVX-512 VNNI builds run
 * CQ4's groups of 128 on cq_vbmi.c's i8_row_g128 instead (session 20) and every other
 * 4-bit group here. */
#include "neon_common.h"

#if !CN_NATIVE && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include "avx2_common.h"

int cn_cq_i8_avx2_usable(int bits, int d) {
    return ((bits == 4 || bits == 5 || bits == 6) && d == 1) || (bits == 6 && d == 2);
}

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

/* The cq6 head: 32 weights, codes v .. v+31 of the row (count of them, the rest 0). */
CN_INLINE __m256i step6(__m256i acc, const __m256i t[4], const uint8_t *row, int64_t v, int64_t count, int last,
                        const int8_t *x) {
    const __m256i idx = count == 32 ? avx2_codes6x32(row, v, last) : avx2_codes6_short(row, v, count);
    const __m256i m1 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(15));
    const __m256i m2 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(31));
    const __m256i m3 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(47));
    const __m256i w = avx2_lookup64(t, idx, m1, m2, m3);
    const __m256i xv = _mm256_loadu_si256((const __m256i *)x);
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

static void rows6(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    __m256i t[4];
    for (int k = 0; k < 4; k++) t[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(a->cbq + 16 * k)));
    const int64_t ng = a->K / a->group, C = a->group; /* codes per group */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        __m256 tot = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t c = 0; c < C; c += 32) {
                const int64_t v = g * C + c;
                _mm_prefetch((const char *)(row + 3 * v / 4 + PF_L1), _MM_HINT_T0);
                /* a row's last 32 codes: a 16-byte load there may read past the matrix (the
                 * rows know not which is the last; 1 step in K / 32 takes the buffer) */
                const int last = v + 32 >= a->K;
                acc = step6(acc, t, row, v, CN_MIN(32, C - c), last, a->xq + (g * a->nch + c / 64) * 64 + c % 64);
            }
            tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(_cvtsh_ss(sc[g]) * a->xf[g]), tot);
        }
        a->y[n] = hsum8(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

/* The cq6 head on equally spaced levels (backend.quantize_codebook hands them over as
 * cbq[k] = 2k - 63, and w = step * (2k - 63)): the codes are already the unsigned bytes
 * pmaddubsw takes, so 64 weights cost two 6-bit unpacks, two pmaddubsw (a pair is at most
 * 2 x 63 x 127, two pairs still fit int16) and one pmaddwd; 63 x sum(x) per group takes
 * the offset back out, as for CQ4. */
static int uniform6(const int8_t *cbq) {
    for (int k = 0; k < 64; k++)
        if (cbq[k] != 2 * k - 63) return 0;
    return 1;
}

/* Groups of a multiple of 64 codes (the cq6 head's 128): each 64 codes are 48 bytes of
 * the row and 64 of x, both read through pointers that step on, so the loop keeps no
 * index arithmetic (rows6_uniform's 3 * v / 4 and x offsets per step cost the head a
 * third of its speed: 19 against 13.5 ms for 150000 rows of 1024 on one Zen 3 core). */
CN_INLINE void rows6_uniform64(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    const int64_t ng = a->K / a->group, steps = a->group / 64; /* a group's x is contiguous: nch * 64 = group */
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *p = a->codes + n * a->stride, *end = p + 3 * a->K / 4;
        const uint16_t *sc = a->scales + n * ng;
        const int8_t *x = a->xq;
        __m256 tot = _mm256_setzero_ps();
        float off = 0.0f;
        for (int64_t g = 0; g < ng; g++) {
            __m256i acc = _mm256_setzero_si256();
            for (int64_t s = 0; s < steps; s++, p += 48, x += 64) {
                _mm_prefetch((const char *)(p + PF_L1), _MM_HINT_T0);
                _mm_prefetch((const char *)(p + PF_L2), _MM_HINT_T1);
                const __m256i i0 = avx2_codes6x32(p, 0, 0), i1 = avx2_codes6x32(p + 24, 0, p + 48 == end);
                const __m256i q = _mm256_add_epi16(_mm256_maddubs_epi16(i0, _mm256_loadu_si256((const __m256i *)x)),
                                                   _mm256_maddubs_epi16(i1, _mm256_loadu_si256((const __m256i *)(x + 32))));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(q, ones));
            }
            const float f = _cvtsh_ss(sc[g]) * a->xf[g];
            tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(2.0f * f), tot);
            off += f * (float)a->xsum[g];
        }
        a->y[n] = hsum8(tot) - 63.0f * off + (a->bias ? a->bias[n] : 0.0f);
    }
}

static void rows6_uniform(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    if (a->group % 64 == 0) {
        rows6_uniform64(a, n0, n1);
        return;
    }
    const int64_t ng = a->K / a->group, C = a->group; /* codes per group */
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        __m256 tot = _mm256_setzero_ps();
        float off = 0.0f;
        for (int64_t g = 0; g < ng; g++) {
            const int8_t *x = a->xq + g * a->nch * 64; /* a group's x is contiguous, zero after C */
            __m256i acc = _mm256_setzero_si256();
            int64_t c = 0;
            for (; c + 64 <= C; c += 64) {
                const int64_t v = g * C + c;
                _mm_prefetch((const char *)(row + 3 * v / 4 + PF_L1), _MM_HINT_T0);
                _mm_prefetch((const char *)(row + 3 * v / 4 + PF_L2), _MM_HINT_T1);
                /* the first half's 16-byte loads end inside the second half's codes */
                const __m256i i0 = avx2_codes6x32(row, v, 0), i1 = avx2_codes6x32(row, v + 32, v + 64 >= a->K);
                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(i0, _mm256_loadu_si256((const __m256i *)(x + c))),
                                                   _mm256_maddubs_epi16(i1, _mm256_loadu_si256((const __m256i *)(x + c + 32))));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
            }
            for (; c < C; c += 32) {
                const int64_t v = g * C + c, count = CN_MIN(32, C - c);
                const __m256i i = count == 32 ? avx2_codes6x32(row, v, v + 32 >= a->K) : avx2_codes6_short(row, v, count);
                const __m256i p = _mm256_maddubs_epi16(i, _mm256_loadu_si256((const __m256i *)(x + c)));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
            }
            const float f = _cvtsh_ss(sc[g]) * a->xf[g];
            tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(2.0f * f), tot);
            off += f * (float)a->xsum[g];
        }
        a->y[n] = hsum8(tot) - 63.0f * off + (a->bias ? a->bias[n] : 0.0f);
    }
}

/* 5-bit codes of scalars (the 32 Lloyd-Max levels cq4 widens its most sensitive tensors to,
 * and the cq5 head): codebook in [-127, 127] as for cq6, whose sign trick it shares; the 32
 * entries are two pshufb tables, chosen by the code's bit 4.  32 weights cost the 5-bit unpack
 * (two shuffles, two multiplies, two shifts, a pack and a mask), two pshufb, a compare, a blend,
 * abs, sign, pmaddubsw and pmaddwd. */
static void rows5(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    const __m256i t0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)a->cbq));
    const __m256i t1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(a->cbq + 16)));
    const __m256i ones = _mm256_set1_epi16(1), fifteen = _mm256_set1_epi8(15);
    const int64_t ng = a->K / a->group, C = a->group; /* codes per group */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        __m256 tot = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const int8_t *x = a->xq + g * a->nch * 64; /* a group's x is contiguous, zero after C */
            __m256i acc = _mm256_setzero_si256();
            _mm_prefetch((const char *)(row + 5 * g * C / 8 + PF_L1), _MM_HINT_T0);
            _mm_prefetch((const char *)(row + 5 * g * C / 8 + PF_L2), _MM_HINT_T1);
            for (int64_t c = 0; c < C; c += 32) {
                const int64_t v = g * C + c;
                const __m256i idx = C - c >= 32 ? avx2_codes5x32(row, v) : avx2_codes5_short(row, v, C - c);
                const __m256i w = _mm256_blendv_epi8(_mm256_shuffle_epi8(t0, idx), _mm256_shuffle_epi8(t1, idx),
                                                     _mm256_cmpgt_epi8(idx, fifteen));
                const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + c));
                const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
            }
            tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(_cvtsh_ss(sc[g]) * a->xf[g]), tot);
        }
        a->y[n] = hsum8(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

/* ---- 6-bit codes of 2-vectors (CQ3) ----------------------------------------
 *
 * Each component's 64 entries are four pshufb tables, as for
 * the cq6 head, and x is laid out per component (cn_cq_i8_xdim 2), so the 32 codes of a step
 * give 32 weights of each component that meet 32 contiguous bytes of x.  64 weights cost the
 * 6-bit unpack, three compares, two 64-entry lookups (four pshufb and three blends each), and
 * abs, sign, pmaddubsw and pmaddwd per component.  (The 256 entries of 8-bit codes, CQ2's and
 * the old CQ4's, are too many for pshufb; one vpgatherdd of eight codes' packed components was
 * measured at 3.1-3.4 GB/s of codes on two Zen 3 cores, below the exact kernel's 4.2-5.1, so
 * those stay exact here: docs/cpu_neon.md, "Session 17".) */
static void rows_v6x2(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    /* Each table's entries XORed with the previous one's: for a code in [16 j, 16 j + 16) the
     * lookups of tables 0..j are in range and XOR to entry j's value; those of later tables see
     * a negative index (code - 16 k), which pshufb reads as 0.  No masks, no blends. */
    __m256i t[2][4];
    for (int e = 0; e < 2; e++)
        for (int k = 0; k < 4; k++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(a->cbq + 64 * e + 16 * k));
            if (k) v = _mm_xor_si128(v, _mm_loadu_si128((const __m128i *)(a->cbq + 64 * e + 16 * (k - 1))));
            t[e][k] = _mm256_broadcastsi128_si256(v);
        }
    const int64_t ng = a->K / a->group, C = a->group / 2, codes = a->K / 2; /* codes per group, per row */
    const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi8(16);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        __m256 tot = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            __m256i acc = _mm256_setzero_si256();
            _mm_prefetch((const char *)(row + 3 * g * C / 4 + PF_L1), _MM_HINT_T0);
            _mm_prefetch((const char *)(row + 3 * g * C / 4 + PF_L2), _MM_HINT_T1);
            for (int64_t c = 0; c < C; c += 32) {
                const int64_t v = g * C + c, count = CN_MIN(32, C - c);
                const __m256i i0 = count == 32 ? avx2_codes6x32(row, v, v + 32 >= codes)
                                               : avx2_codes6_short(row, v, count);
                const __m256i i1 = _mm256_sub_epi8(i0, sixteen), i2 = _mm256_sub_epi8(i1, sixteen);
                const __m256i i3 = _mm256_sub_epi8(i2, sixteen);
                const int8_t *x = a->xq + (g * a->nch + c / 64) * 128 + c % 64; /* component e at x + 64 e */
                for (int e = 0; e < 2; e++) {
                    const __m256i w = _mm256_xor_si256(
                        _mm256_xor_si256(_mm256_shuffle_epi8(t[e][0], i0), _mm256_shuffle_epi8(t[e][1], i1)),
                        _mm256_xor_si256(_mm256_shuffle_epi8(t[e][2], i2), _mm256_shuffle_epi8(t[e][3], i3)));
                    const __m256i xv = _mm256_loadu_si256((const __m256i *)(x + 64 * e));
                    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(xv, w));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ones));
                }
            }
            tot = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(_cvtsh_ss(sc[g]) * a->xf[g]), tot);
        }
        a->y[n] = hsum8(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

void cn_cq_i8_avx2_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    if (a->d == 2) {
        rows_v6x2(a, n0, n1);
        return;
    }
    if (a->bits == 5) {
        rows5(a, n0, n1);
        return;
    }
    if (a->bits == 6) {
        uniform6(a->cbq) ? rows6_uniform(a, n0, n1) : rows6(a, n0, n1);
        return;
    }
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
