/* CQ decode (8- and 6-bit codes of 2-vectors: CQ4, CQ3; 6- and 5-bit codes
 * of scalars: the cq6 / cq5 heads) with AVX-512 VBMI byte permutes.
 *
 * The NEON kernel in cq.c gathers one codebook entry per code: at best about
 * one code per cycle on the 2-core EPYC, far below memory bandwidth.  x86
 * has no cheap NEON route around that (SIMDe turns the 64-byte table lookup
 * vqtbl4q into nine SSE instructions), but AVX-512 VBMI looks up 64 bytes in
 * a 128-byte table with one instruction.  So the codebook, widened to
 * float32, is split into byte planes: the codebook is float16, so the low
 * byte of every float32 value is zero and three planes per component hold
 * the rest.  64 8-bit codes cost 6 x (2 permutes + 1 blend), 6-bit codes (a
 * 64-entry codebook) one permute per plane after unpacking, then eight byte
 * and eight 16-bit interleaves assemble the 128 float32 weights, with no
 * per-code scalar work and no float16 conversion (planes of the float16 bits
 * plus converts measured 7.0 G codes/s in a C micro-benchmark, these 8.2).
 * The result is exact: the planes hold the codebook's own bits.
 *
 * The interleaves work per 128-bit lane, so the 64 weights of one component
 * come out as four vectors holding codes [0-3, 16-19, 32-35, 48-51], [4-7,
 * 20-23, ...], [8-11, ...], [12-15, ...].  x is permuted to match once per
 * call (cn_cq_vbmi_permute_x), shared by every row.  In each vector the low
 * eight floats come from codes 0-31 of the block and the high eight from
 * codes 32-63, so a group of 64 weights (32 codes) takes its own scale
 * through a two-valued scale vector.
 *
 * The second half of the file is the int8-activation decode (cq_i8.c has
 * the design): the codebook quantized to int8 is looked up with the same
 * permutes, one byte plane per component, and vpdpbusd multiplies it with
 * x's int8 values, 64 codes per two products: 28-29 GB/s of codes on one
 * core from cache for CQ4 in groups of 128 (i8_row_g128; 22-23 in the general
 * loop), 4x the exact kernel, 17-23 from DRAM.  It also needs
 * AVX-512 VNNI and VL, and serves 4-vectors (CQ2) and scalar codebooks of 64
 * or 32 entries (one vpermb and one vpdpbusd per 64 weights) as well.
 *
 * Compiled only where the compiler targets AVX-512 VBMI (-march=native on
 * such a CPU); elsewhere cq.c's and cq_i8.c's NEON paths run. */
#include "neon_common.h"

#if defined(__AVX512VBMI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#include <immintrin.h>

/* Layouts: 8- and 6-bit codes of 2-vectors (blocks of 128 inputs), 6- and
 * 5-bit codes of scalars (blocks of 64), groups of whole halves of a 2-vector
 * block.  The planes drop the low byte of each float32 entry: usable only when
 * the float32 codebook it is given (the format stores float16) is exactly float16. */
int cn_cq_vbmi_fits(const float *cb, int bits, int d, int64_t K, int64_t group) {
    if (!((d == 2 && (bits == 8 || bits == 6)) || (d == 1 && (bits == 6 || bits == 5)))) return 0;
    if (K % (64 * d) || group % 64) return 0;
    for (int i = 0; i < d << bits; i++)
        if (_cvtsh_ss(_cvtss_sh(cb[i], _MM_FROUND_TO_NEAREST_INT)) != cb[i] && cb[i] == cb[i]) return 0;
    return 1;
}

/* Position, in the kernel's order, of code i of a 64-code block (see above). */
static int64_t vbmi_slot(int64_t i) {
    const int64_t lane = i / 16, in_lane = i % 16;
    return (in_lane / 4) * 16 + lane * 4 + in_lane % 4;
}

void cn_cq_vbmi_permute_x(const float *x, int64_t K, int d, float *xp) {
    /* per block of 64 codes (64 d inputs): 64 first components, then 64 second components */
    for (int64_t b = 0; b < K / (64 * d); b++)
        for (int64_t i = 0; i < 64; i++)
            for (int e = 0; e < d; e++) xp[b * 64 * d + 64 * e + vbmi_slot(i)] = x[b * 64 * d + d * i + e];
}

void cn_cq_vbmi_planes(const float *cb, int bits, int d, uint8_t planes[6][256]) {
    memset(planes, 0, 6 * 256);
    for (int c = 0; c < 1 << bits; c++)
        for (int e = 0; e < d; e++) {
            uint32_t u;
            memcpy(&u, cb + d * c + e, 4);
            for (int byte = 1; byte < 4; byte++) planes[3 * e + byte - 1][c] = (uint8_t)(u >> (8 * byte));
        }
}

/* 64 codes of 6 bits (48 bytes, of which `bytes` are read) as 64 bytes: each
 * 3-byte group is spread to a 32-bit slot, then one multishift picks the four
 * 6-bit fields of each. */
CN_INLINE __m512i unpack6_n(const uint8_t *p, __mmask64 bytes) {
    static const int8_t spread_idx[64] = {
        0,  1,  2,  0,  3,  4,  5,  0,  6,  7,  8,  0,  9,  10, 11, 0,  12, 13, 14, 0,  15, 16,
        17, 0,  18, 19, 20, 0,  21, 22, 23, 0,  24, 25, 26, 0,  27, 28, 29, 0,  30, 31, 32, 0,
        33, 34, 35, 0,  36, 37, 38, 0,  39, 40, 41, 0,  42, 43, 44, 0,  45, 46, 47, 0};
    const __m512i raw = _mm512_maskz_loadu_epi8(bytes, p); /* never reads past the row */
    const __m512i spread = _mm512_permutexvar_epi8(_mm512_loadu_si512(spread_idx), raw);
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x322C2620120C0600ll), spread);
    return _mm512_and_si512(fields, _mm512_set1_epi8(63));
}

CN_INLINE __m512i unpack6(const uint8_t *p) { return unpack6_n(p, 0xffffffffffffull); }

/* 64 codes of 5 bits (40 bytes, of which `bytes` are read) as 64 bytes: each
 * 5-byte group of eight codes is spread to a 64-bit lane, then one multishift
 * picks its eight fields (bit offsets 0, 5, ..., 35). */
CN_INLINE __m512i unpack5_n(const uint8_t *p, __mmask64 bytes) {
    static const int8_t spread_idx[64] = {
        0,  1,  2,  3,  4,  0, 0, 0, 5,  6,  7,  8,  9,  0, 0, 0, 10, 11, 12, 13, 14, 0,
        0,  0,  15, 16, 17, 18, 19, 0, 0, 0, 20, 21, 22, 23, 24, 0, 0,  0,  25, 26, 27, 28,
        29, 0,  0,  0,  30, 31, 32, 33, 34, 0, 0, 0, 35, 36, 37, 38, 39, 0, 0,  0};
    const __m512i raw = _mm512_maskz_loadu_epi8(bytes, p);
    const __m512i spread = _mm512_permutexvar_epi8(_mm512_loadu_si512(spread_idx), raw);
    const __m512i fields = _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x231E19140F0A0500ll), spread);
    return _mm512_and_si512(fields, _mm512_set1_epi8(31));
}

typedef struct {
    __m512i t[6][2][2]; /* plane p, entries 64 * (2 * i + j) .. + 63 */
} planes_zmm;

CN_INLINE void load_planes(const uint8_t planes[6][256], planes_zmm *z) {
    for (int p = 0; p < 6; p++)
        for (int q = 0; q < 4; q++) z->t[p][q / 2][q % 2] = _mm512_loadu_si512(planes[p] + 64 * q);
}

/* The 64 d weights of block b of a row, unscaled: w[e][q] is component e,
 * vector q of the order above. */
CN_INLINE void decode_block(const planes_zmm *z, const uint8_t *row, int64_t b, const int bits, const int d,
                            __m512 w[2][4]) {
    __m512i P[6];
    if (d == 1) { /* 64- or 32-entry scalar codebook: one permute per plane */
        const __m512i c = bits == 6 ? unpack6(row + 48 * b) : unpack5_n(row + 40 * b, 0xffffffffffull);
        for (int p = 0; p < 3; p++) P[p] = _mm512_permutexvar_epi8(c, z->t[p][0][0]);
    } else if (bits == 8) {
        const __m512i c = _mm512_loadu_si512(row + 64 * b);
        const __mmask64 high = _mm512_movepi8_mask(c); /* codes 128-255 */
        for (int p = 0; p < 6; p++)
            P[p] = _mm512_mask_blend_epi8(high, _mm512_permutex2var_epi8(z->t[p][0][0], c, z->t[p][0][1]),
                                          _mm512_permutex2var_epi8(z->t[p][1][0], c, z->t[p][1][1]));
    } else {
        const __m512i c = unpack6(row + 48 * b);
        for (int p = 0; p < 6; p++) P[p] = _mm512_permutexvar_epi8(c, z->t[p][0][0]);
    }
    const __m512i zero = _mm512_setzero_si512();
    for (int e = 0; e < d; e++) {
        const __m512i b1 = P[3 * e], b2 = P[3 * e + 1], b3 = P[3 * e + 2];
        const __m512i l0 = _mm512_unpacklo_epi8(zero, b1), l1 = _mm512_unpackhi_epi8(zero, b1);
        const __m512i h0 = _mm512_unpacklo_epi8(b2, b3), h1 = _mm512_unpackhi_epi8(b2, b3);
        w[e][0] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(l0, h0));
        w[e][1] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(l0, h0));
        w[e][2] = _mm512_castsi512_ps(_mm512_unpacklo_epi16(l1, h1));
        w[e][3] = _mm512_castsi512_ps(_mm512_unpackhi_epi16(l1, h1));
    }
}

/* Scales of block b: with 2-vectors the low eight floats of each vector
 * belong to the first 64 weights of the block, the high eight to the last
 * 64; a scalar block of 64 weights lies in one group. */
CN_INLINE __m512 block_scales(const uint16_t *sc, int64_t b, int64_t halves_per_group, const int d) {
    if (d == 1) return _mm512_set1_ps(_cvtsh_ss(sc[b / halves_per_group]));
    return _mm512_mask_blend_ps(0xff00, _mm512_set1_ps(_cvtsh_ss(sc[2 * b / halves_per_group])),
                                _mm512_set1_ps(_cvtsh_ss(sc[(2 * b + 1) / halves_per_group])));
}

CN_INLINE void vbmi_rows(const float *xp, int64_t K, const uint8_t *codes, int64_t stride,
                         const uint16_t *scales, int64_t group, const float *cb, int64_t n0, int64_t n1,
                         const float *bias, float *y, const int bits, const int d) {
    uint8_t planes[6][256];
    cn_cq_vbmi_planes(cb, bits, d, planes);
    planes_zmm z;
    load_planes(planes, &z);
    const int64_t ng = K / group, halves_per_group = group / 64;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = codes + n * stride;
        const uint16_t *sc = scales + n * ng;
        __m512 tot = _mm512_setzero_ps();
        for (int64_t b = 0; b < K / (64 * d); b++) {
            __m512 w[2][4];
            decode_block(&z, row, b, bits, d, w);
            const float *xb = xp + 64 * d * b;
            __m512 a0 = _mm512_mul_ps(w[0][0], _mm512_loadu_ps(xb)), a1 = _mm512_mul_ps(w[0][1], _mm512_loadu_ps(xb + 16));
            a0 = _mm512_fmadd_ps(w[0][2], _mm512_loadu_ps(xb + 32), a0);
            a1 = _mm512_fmadd_ps(w[0][3], _mm512_loadu_ps(xb + 48), a1);
            if (d == 2) {
                a0 = _mm512_fmadd_ps(w[1][0], _mm512_loadu_ps(xb + 64), a0);
                a1 = _mm512_fmadd_ps(w[1][1], _mm512_loadu_ps(xb + 80), a1);
                a0 = _mm512_fmadd_ps(w[1][2], _mm512_loadu_ps(xb + 96), a0);
                a1 = _mm512_fmadd_ps(w[1][3], _mm512_loadu_ps(xb + 112), a1);
            }
            tot = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), block_scales(sc, b, halves_per_group, d), tot);
        }
        y[n] = _mm512_reduce_add_ps(tot) + (bias ? bias[n] : 0.0f);
    }
}

void cn_cq_vbmi_rows(const float *xp, int64_t K, const uint8_t *codes, int64_t stride, int bits, int d,
                     const uint16_t *scales, int64_t group, const float *cb, int64_t n0, int64_t n1,
                     const float *bias, float *y) {
    if (d == 1) {
        if (bits == 6) vbmi_rows(xp, K, codes, stride, scales, group, cb, n0, n1, bias, y, 6, 1);
        else vbmi_rows(xp, K, codes, stride, scales, group, cb, n0, n1, bias, y, 5, 1);
    } else if (bits == 8) {
        vbmi_rows(xp, K, codes, stride, scales, group, cb, n0, n1, bias, y, 8, 2);
    } else {
        vbmi_rows(xp, K, codes, stride, scales, group, cb, n0, n1, bias, y, 6, 2);
    }
}

/* Prefill: weights [k0, k1) of one row (k0, k1 multiples of 64 d), scaled,
 * in the kernel's order within each block, so that x permuted by
 * cn_cq_vbmi_permute_x meets them; the packed-panel GEMM then needs no
 * per-weight scalar work to decode. */
CN_INLINE void vbmi_decode(const planes_zmm *z, const uint8_t *row, const uint16_t *sc, int64_t group, int64_t k0,
                           int64_t k1, float *out, const int bits, const int d) {
    for (int64_t b = k0 / (64 * d); b < k1 / (64 * d); b++) {
        __m512 w[2][4];
        decode_block(z, row, b, bits, d, w);
        const __m512 s = block_scales(sc, b, group / 64, d);
        float *ob = out + 64 * d * b - k0;
        for (int e = 0; e < d; e++)
            for (int q = 0; q < 4; q++) _mm512_storeu_ps(ob + 64 * e + 16 * q, _mm512_mul_ps(w[e][q], s));
    }
}

void cn_cq_vbmi_decode(const uint8_t planes[6][256], const uint8_t *row, const uint16_t *sc, int64_t group,
                       int bits, int d, int64_t k0, int64_t k1, float *out) {
    planes_zmm z;
    load_planes(planes, &z);
    if (d == 1) {
        if (bits == 6) vbmi_decode(&z, row, sc, group, k0, k1, out, 6, 1);
        else vbmi_decode(&z, row, sc, group, k0, k1, out, 5, 1);
    } else if (bits == 8) {
        vbmi_decode(&z, row, sc, group, k0, k1, out, 8, 2);
    } else {
        vbmi_decode(&z, row, sc, group, k0, k1, out, 6, 2);
    }
}

/* ---- int8 activations (cq_i8.c has the design) ---------------------------- */
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)

int cn_cq_i8_avx512_usable(int bits, int d) { return cn_cq_i8_codes(bits, d); }

/* vpdpbusd multiplies unsigned bytes by signed ones: the codebook goes in as
 * q + 128 and x as it is, and 128 * sum(x) over each group, shared by every
 * row, takes the offset back out. */
typedef struct {
    __m512i t[4][4]; /* component e, entries 64 q .. 64 q + 63, plus 128 */
} i8_tables;

CN_INLINE void i8_load_tables(const int8_t *cbq, const int bits, const int d, i8_tables *z) {
    /* a 32-entry table (5-bit codes) fills half a register: never read past it */
    const __mmask64 m = bits == 5 ? 0xffffffffull : ~0ull;
    for (int e = 0; e < d; e++)
        for (int q = 0; q < (bits == 8 ? 4 : 1); q++)
            z->t[e][q] = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, cbq + (e << bits) + 64 * q), _mm512_set1_epi8(-128));
}

/* count codes (<= 64, a multiple of 4) from code v of a row, one per byte;
 * lanes past count read as code 0 (their x is 0). */
CN_INLINE __m512i i8_codes(const uint8_t *row, int64_t v, int64_t count, const int bits) {
    if (bits == 8)
        return count == 64 ? _mm512_loadu_si512(row + v)
                           : _mm512_maskz_loadu_epi8(_bzhi_u64(~0ull, (unsigned)count), row + v);
    if (bits == 5) return unpack5_n(row + 5 * (v / 8), _bzhi_u64(~0ull, (unsigned)(5 * count / 8)));
    return unpack6_n(row + 3 * (v / 4), _bzhi_u64(~0ull, (unsigned)(3 * count / 4)));
}

/* One component's weights for 64 codes: a 256-entry table is two 128-byte
 * halves, looked up by vpermi2b and picked by the code's top bit; 64 or 32
 * entries take one vpermb. */
CN_INLINE __m512i i8_lookup(const __m512i *t, __m512i c, const int bits) {
    if (bits != 8) return _mm512_permutexvar_epi8(c, t[0]);
    return _mm512_mask_blend_epi8(_mm512_movepi8_mask(c), _mm512_permutex2var_epi8(t[0], c, t[1]),
                                  _mm512_permutex2var_epi8(t[2], c, t[3]));
}

/* Row n.  full: the group holds a whole number of 64-code chunks (no masked
 * loads).  One row at a time: two rows side by side (sharing x's loads) ran
 * as fast from cache but at half the speed from DRAM, where two interleaved
 * streams defeat the hardware prefetcher (7.4 against 15 GB/s of codes on
 * one core, 128 MiB of codes).  A software prefetch I8_PREFETCH bytes ahead
 * keeps more lines in flight than the hardware prefetcher does: 4096 bytes
 * against 512 took 128 MiB of CQ4 codes from 12.4 to 15-16 GB/s on one core
 * and from 26-27 to 31-32 GB/s on two (docs/cpu_neon.md, Session 7).  A
 * second one, I8_PREFETCH_L2 bytes ahead into L2 only (prefetcht1), puts
 * more misses in flight than the L1's fill buffers allow: 28 Qwen3-0.6B
 * blocks at one thread 15-16 -> 13-15 ms per token, 128 MiB of CQ4 codes
 * on one core 17-18 -> 21-23 GB/s (Session 9; 8 and 32 KiB did no better).
 * Past the end of a thread's rows they fetch lines a neighbour reads (past
 * the matrix, nothing: a prefetch never faults).  The
 * per-group factors (weight scale x xf) are made 16 groups
 * at a time, and the -128 sum(x) offset is folded into them: per row, sum
 * over groups of factor * -128 sum(x), one FMA per 16 groups. */
#define I8_PREFETCH 4096
#define I8_PREFETCH_L2 16384

/* Groups g0 .. g0+15 of a row: their factors (weight scale x xf) into f, and
 * their share of the -128 sum(x) offset added to off. */
CN_INLINE __m512 i8_factors(const cn_cq_i8_args *a, const uint16_t *sc, int64_t g0, int64_t ng, float f[16],
                            __m512 off) {
    const __mmask16 m = (__mmask16)_bzhi_u32(0xffffu, (unsigned)CN_MIN(16, ng - g0));
    const __m512 s = _mm512_mul_ps(_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, sc + g0)),
                                   _mm512_maskz_loadu_ps(m, a->xf + g0));
    const __m512i xsum = _mm512_maskz_loadu_epi32(m, a->xsum + g0);
    _mm512_storeu_ps(f, s);
    return _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(_mm512_mullo_epi32(xsum, _mm512_set1_epi32(-128))), off);
}

CN_INLINE float i8_row(const cn_cq_i8_args *a, const i8_tables *z, int64_t n, const int bits, const int d,
                       const int full) {
    const int64_t ng = a->K / a->group, C = a->group / d;
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * ng;
    __m512 tot = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    for (int64_t g0 = 0; g0 < ng; g0 += 16) {
        float f[16];
        off = i8_factors(a, sc, g0, ng, f, off);
        for (int64_t g = g0; g < CN_MIN(ng, g0 + 16); g++) {
            __m512i acc = _mm512_setzero_si512();
            for (int64_t c = 0; c < C; c += 64) {
                const int8_t *xq = a->xq + (g * a->nch + c / 64) * 64 * d;
                const int64_t v = g * C + c;
                _mm_prefetch((const char *)(row + v * bits / 8 + I8_PREFETCH), _MM_HINT_T0);
                _mm_prefetch((const char *)(row + v * bits / 8 + I8_PREFETCH_L2), _MM_HINT_T1);
                const __m512i codes = i8_codes(row, v, full ? 64 : CN_MIN(64, C - c), bits);
                for (int e = 0; e < d; e++)
                    acc = _mm512_dpbusd_epi32(acc, i8_lookup(z->t[e], codes, bits), _mm512_loadu_si512(xq + 64 * e));
            }
            tot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(f[g - g0]), tot);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(tot, off)) + (a->bias ? a->bias[n] : 0.0f);
}

/* CQ4 (8-bit codes of 2-vectors) in groups of 128 inputs, the layout of every CQ4
 * model: a group is one chunk of 64 codes, so the chunk loop, its index arithmetic
 * and the masked loads go, and the lookup of the 256-entry table takes two
 * merge-masked vpermi2b per component instead of two vpermi2b and a blend: the
 * first writes the lanes of codes 0-127 and leaves the others holding their
 * code, which the second looks up in entries 128-255 (one register copy of the
 * codes per component instead of two, no blend).  28-29 against 22-23 GB/s of
 * codes on one core from L2 (docs/cpu_neon.md, Session 9).  Same arithmetic in
 * the same order as i8_row: bit for bit the same result. */
CN_INLINE __m512i i8_lookup256(const __m512i *t, __m512i c, __mmask64 lo, __mmask64 hi) {
    return _mm512_mask2_permutex2var_epi8(t[2], _mm512_mask2_permutex2var_epi8(t[0], c, lo, t[1]), hi, t[3]);
}

/* Groups of 128 inputs, the CQ4 layouts of every CQ4 model: a group's 64 code bytes are one
 * load. 8-bit codes of 2-vectors (CQ4 before session 12) look up two 256-entry planes.
 * nibbles: 4-bit scalar codes (CQ4 since), whose low nibbles are the even inputs and high
 * nibbles the odd ones (x's layout, cn_cq_i8_xdim: a group's 64 even inputs, then its 64 odd
 * ones), looked up by vpshufb in the 16 entries z->t[0][0] repeats in each 128-bit lane: two
 * masks, a shift, two vpshufb and two vpdpbusd per 128 weights, where cq_i8_avx2.c's loop,
 * which served them until session 20, takes twice the instructions for half the weights
 * (pmaddubsw and pmaddwd for each vpdpbusd). The integer sums are the same as there (q + 128
 * here, q + 64 there, the offset taken out per group either way). */
CN_INLINE float i8_row_g128(const cn_cq_i8_args *a, const i8_tables *z, int64_t n, const int nibbles) {
    const int64_t ng = a->K / 128;
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * ng;
    const int8_t *xq = a->xq;
    const __m512i fifteen = _mm512_set1_epi8(15);
    __m512 tot = _mm512_setzero_ps(), off = _mm512_setzero_ps();
    for (int64_t g0 = 0; g0 < ng; g0 += 16) {
        float f[16];
        off = i8_factors(a, sc, g0, ng, f, off);
        const int64_t ge = CN_MIN(ng, g0 + 16);
        for (int64_t g = g0; g < ge; g++) {
            const uint8_t *p = row + 64 * g;
            _mm_prefetch((const char *)(p + I8_PREFETCH), _MM_HINT_T0);
            _mm_prefetch((const char *)(p + I8_PREFETCH_L2), _MM_HINT_T1);
            const __m512i c = _mm512_loadu_si512(p);
            __m512i w0, w1;
            if (nibbles) {
                w0 = _mm512_shuffle_epi8(z->t[0][0], _mm512_and_si512(c, fifteen));
                w1 = _mm512_shuffle_epi8(z->t[0][0], _mm512_and_si512(_mm512_srli_epi16(c, 4), fifteen));
            } else {
                const __mmask64 hi = _mm512_movepi8_mask(c), lo = _knot_mask64(hi);
                w0 = i8_lookup256(z->t[0], c, lo, hi);
                w1 = i8_lookup256(z->t[1], c, lo, hi);
            }
            __m512i acc = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w0, _mm512_loadu_si512(xq + 128 * g));
            acc = _mm512_dpbusd_epi32(acc, w1, _mm512_loadu_si512(xq + 128 * g + 64));
            tot = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_set1_ps(f[g - g0]), tot);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(tot, off)) + (a->bias ? a->bias[n] : 0.0f);
}

CN_INLINE void i8_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1, const int bits, const int d,
                       const int full) {
    i8_tables z;
    i8_load_tables(a->cbq, bits, d, &z);
    for (int64_t n = n0; n < n1; n++) a->y[n] = i8_row(a, &z, n, bits, d, full);
}

/* Specialised on (bits, d, whole chunks); CQ2's groups of 128 are 32 codes of
 * 4-vectors, half a chunk (the masked lanes cost their share of the work). */
CN_INLINE void i8_rows_b(const cn_cq_i8_args *a, int64_t n0, int64_t n1, const int bits, const int d) {
    if (a->group % (64 * d) == 0) i8_rows(a, n0, n1, bits, d, 1);
    else i8_rows(a, n0, n1, bits, d, 0);
}

void cn_cq_i8_avx512_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) {
    if (a->bits == 4) { /* scalar codes (cn_cq_i8_codes): groups other than 128 keep the AVX2 loop */
        if (a->group != 128) {
            cn_cq_i8_avx2_rows(a, n0, n1);
            return;
        }
        uint8_t t[16];
        for (int i = 0; i < 16; i++) t[i] = (uint8_t)(a->cbq[i] + 128);
        i8_tables z;
        z.t[0][0] = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)t));
        for (int64_t n = n0; n < n1; n++) a->y[n] = i8_row_g128(a, &z, n, 1);
        return;
    }
    if (a->d == 2 && a->bits == 8 && a->group == 128) {
        i8_tables z;
        i8_load_tables(a->cbq, 8, 2, &z);
        for (int64_t n = n0; n < n1; n++) a->y[n] = i8_row_g128(a, &z, n, 0);
        return;
    }
    if (a->d == 1) a->bits == 6 ? i8_rows_b(a, n0, n1, 6, 1) : i8_rows_b(a, n0, n1, 5, 1);
    else if (a->d == 2) a->bits == 8 ? i8_rows_b(a, n0, n1, 8, 2) : i8_rows_b(a, n0, n1, 6, 2);
    else a->bits == 8 ? i8_rows_b(a, n0, n1, 8, 4) : i8_rows_b(a, n0, n1, 6, 4);
}

#else

int cn_cq_i8_avx512_usable(int bits, int d) {
    (void)bits, (void)d;
    return 0;
}
void cn_cq_i8_avx512_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) { (void)a, (void)n0, (void)n1; }

#endif

#else
int cn_cq_vbmi_fits(const float *cb, int bits, int d, int64_t K, int64_t group) {
    (void)cb, (void)bits, (void)d, (void)K, (void)group;
    return 0;
}
void cn_cq_vbmi_permute_x(const float *x, int64_t K, int d, float *xp) { (void)x, (void)K, (void)d, (void)xp; }
void cn_cq_vbmi_planes(const float *cb, int bits, int d, uint8_t planes[6][256]) {
    (void)cb, (void)bits, (void)d, (void)planes;
}
void cn_cq_vbmi_decode(const uint8_t planes[6][256], const uint8_t *row, const uint16_t *sc, int64_t group,
                       int bits, int d, int64_t k0, int64_t k1, float *out) {
    (void)planes, (void)row, (void)sc, (void)group, (void)bits, (void)d, (void)k0, (void)k1, (void)out;
}
void cn_cq_vbmi_rows(const float *xp, int64_t K, const uint8_t *codes, int64_t stride, int bits, int d,
                     const uint16_t *scales, int64_t group, const float *cb, int64_t n0, int64_t n1,
                     const float *bias, float *y) {
    (void)xp, (void)K, (void)codes, (void)stride, (void)bits, (void)d, (void)scales, (void)group, (void)cb;
    (void)n0, (void)n1, (void)bias, (void)y;
}

int cn_cq_i8_avx512_usable(int bits, int d) {
    (void)bits, (void)d;
    return 0;
}
void cn_cq_i8_avx512_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1) { (void)a, (void)n0, (void)n1; }

#endif
