/* Shared by every kernel file: the NEON header (native or SIMDe), threading,
 * weight widening and vector math (exp, tanh, erfc).
 *
 * One source serves every CPU: on AArch64 the intrinsics are the real ones
 * from arm_neon.h; elsewhere SIMDe's native aliases map the same names onto
 * SSE/AVX (or plain C), so x86 builds run, and are tested, through the very
 * code an ARM phone runs. */
#ifndef CACTUS_NEON_COMMON_H
#define CACTUS_NEON_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if (defined(__aarch64__) || defined(_M_ARM64)) && !defined(CACTUS_FORCE_SIMDE)
#include <arm_neon.h>
#define CN_NATIVE 1
#else
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/arm/neon.h>
#define CN_NATIVE 0
#if defined(__F16C__)
#include <immintrin.h>
#endif
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

#include "cactus_neon.h"

#define CN_F32 0
#define CN_F16 1
#define CN_BF16 2

#define CN_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CN_MAX(a, b) ((a) > (b) ? (a) : (b))
#if defined(_MSC_VER)
#define CN_INLINE static __forceinline
#else
#define CN_INLINE static inline __attribute__((always_inline))
#endif

/* Thread count for parallel regions (set once by the Python backend). */
extern int cn_threads;

/* Below this much work (multiply-adds, or elements for light ops) a parallel
 * region costs more than it saves. */
#define CN_PAR_MIN_WORK 32768

/* Runs fn(ctx, begin, end) over [0, n) split into one contiguous range per
 * thread (runtime.c).  Kernels pass the work through a context struct and
 * keep their type-specialised loops in plain functions: the OpenMP region
 * lives in one place, and the compiler never has to specialise a loop
 * inside an outlined parallel body (which it does not do). */
typedef void (*cn_range_fn)(const void *ctx, int64_t begin, int64_t end);
void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx);

/* The float GEMM microkernel of linear.c, for panels other kernels decode:
 * acc[i][j] = dot(xr[i][k0:k1], wr[j][k0:k1]). */
void cn_tile4x4_f32(const float *const xr[4], const float *const wr[4], int64_t k0, int64_t k1,
                    float acc[4][4]);

/* ---- weight widening ---------------------------------------------------- */

CN_INLINE float32x4_t cn_bf16x4(const uint16_t *p) {
    /* bf16 is the top half of an f32: shifting the word up is exact. */
#if CN_NATIVE
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
#else
    /* SIMDe emulates the widening shift lane by lane; widen, then shift, maps to two SSE ops. */
    return vreinterpretq_f32_u32(vshlq_n_u32(vmovl_u16(vld1_u16(p)), 16));
#endif
}

/* float16 words (one per 32-bit lane) to float32 with integer operations, so
 * the emulated path never falls back to one scalar conversion per lane:
 * move exponent+mantissa into f32 position and rescale by 2^112 (this also
 * gets subnormals right), then force the exponent of Inf/NaN to all ones. */
CN_INLINE float32x4_t cn_f16_bits_to_f32(uint32x4_t h) {
    uint32x4_t sign = vshlq_n_u32(vandq_u32(h, vdupq_n_u32(0x8000)), 16);
    uint32x4_t em = vshlq_n_u32(vandq_u32(h, vdupq_n_u32(0x7fff)), 13);
    float32x4_t f = vmulq_f32(vreinterpretq_f32_u32(em), vdupq_n_f32(0x1p112f));
    uint32x4_t special = vcgeq_u32(em, vdupq_n_u32(0x0f800000));
    uint32x4_t bits = vorrq_u32(vreinterpretq_u32_f32(f),
                                vandq_u32(special, vdupq_n_u32(0x7f800000)));
    return vreinterpretq_f32_u32(vorrq_u32(bits, sign));
}

CN_INLINE float32x4_t cn_f16x4(const uint16_t *p) {
#if CN_NATIVE
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
#elif defined(__F16C__)
    return simde_float32x4_from_m128(_mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)p)));
#else
    return cn_f16_bits_to_f32(vmovl_u16(vld1_u16(p)));
#endif
}

CN_INLINE float cn_f16_scalar(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t em = (uint32_t)(h & 0x7fff) << 13;
    float f;
    memcpy(&f, &em, 4);
    f *= 0x1p112f;
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if (em >= 0x0f800000u) bits |= 0x7f800000u;
    bits |= sign;
    memcpy(&f, &bits, 4);
    return f;
}

CN_INLINE float cn_bf16_scalar(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* Eight weights starting at element i, as two float32x4.  One 128-bit load
 * and a zip with zeros (bf16) or a native widening convert (f16): a single
 * instruction each on NEON and on SSE. */
CN_INLINE void cn_load_w8(const void *w, int64_t i, const int wt, float32x4_t *lo,
                          float32x4_t *hi) {
    if (wt == CN_F32) {
        *lo = vld1q_f32((const float *)w + i);
        *hi = vld1q_f32((const float *)w + i + 4);
        return;
    }
    uint16x8_t v = vld1q_u16((const uint16_t *)w + i);
#if CN_NATIVE
    if (wt == CN_F16) {
        float16x8_t h = vreinterpretq_f16_u16(v);
        *lo = vcvt_f32_f16(vget_low_f16(h));
        *hi = vcvt_high_f32_f16(h);
    } else {
        *lo = vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(v), 16));
        *hi = vreinterpretq_f32_u32(vshll_high_n_u16(v, 16));
    }
#elif defined(__F16C__)
    /* SIMDe emulates vcvt_f32_f16 lane by lane; F16C is x86's own widening
     * convert, the one place this source names an x86 instruction. */
    uint16x8_t z = vdupq_n_u16(0);
    if (wt == CN_BF16) {
        *lo = vreinterpretq_f32_u16(vzip1q_u16(z, v));
        *hi = vreinterpretq_f32_u16(vzip2q_u16(z, v));
    } else {
        __m128i raw = simde_uint16x8_to_m128i(v);
        *lo = simde_float32x4_from_m128(_mm_cvtph_ps(raw));
        *hi = simde_float32x4_from_m128(_mm_cvtph_ps(_mm_unpackhi_epi64(raw, raw)));
    }
#else
    uint16x8_t z = vdupq_n_u16(0);
    if (wt == CN_BF16) {
        *lo = vreinterpretq_f32_u16(vzip1q_u16(z, v));
        *hi = vreinterpretq_f32_u16(vzip2q_u16(z, v));
    } else {
        *lo = cn_f16_bits_to_f32(vreinterpretq_u32_u16(vzip1q_u16(v, z)));
        *hi = cn_f16_bits_to_f32(vreinterpretq_u32_u16(vzip2q_u16(v, z)));
    }
#endif
}

/* Four weights starting at element i of a row of type wt, as float32. */
CN_INLINE float32x4_t cn_load_w(const void *w, int64_t i, int wt) {
    if (wt == CN_F32) return vld1q_f32((const float *)w + i);
    if (wt == CN_F16) return cn_f16x4((const uint16_t *)w + i);
    return cn_bf16x4((const uint16_t *)w + i);
}

CN_INLINE float cn_load_w1(const void *w, int64_t i, int wt) {
    if (wt == CN_F32) return ((const float *)w)[i];
    if (wt == CN_F16) return cn_f16_scalar(((const uint16_t *)w)[i]);
    return cn_bf16_scalar(((const uint16_t *)w)[i]);
}

CN_INLINE size_t cn_wsize(int wt) { return wt == CN_F32 ? 4 : 2; }

/* CQ decode (8- and 6-bit codes of 2-vectors, 6- and 5-bit codes of
 * scalars) through AVX-512 VBMI (cq_vbmi.c), in blocks of 64 codes (64 * d
 * inputs); fits() is 0 where the build does not target it (the others then do
 * nothing), for other layouts, and where the codebook is not exactly float16. */
int cn_cq_vbmi_fits(const float *cb, int bits, int d, int64_t K, int64_t group);
void cn_cq_vbmi_permute_x(const float *x, int64_t K, int d, float *xp);
void cn_cq_vbmi_rows(const float *xp, int64_t K, const uint8_t *codes, int64_t stride, int bits, int d,
                     const uint16_t *scales, int64_t group, const float *cb, int64_t n0, int64_t n1,
                     const float *bias, float *y);
/* Prefill: the codebook's byte planes (once per call), then rows decoded in
 * the permuted order of cn_cq_vbmi_permute_x (k0, k1 multiples of 64 * d). */
void cn_cq_vbmi_planes(const float *cb, int bits, int d, uint8_t planes[6][256]);
void cn_cq_vbmi_decode(const uint8_t planes[6][256], const uint8_t *row, const uint16_t *sc, int64_t group,
                       int bits, int d, int64_t k0, int64_t k1, float *out);

/* x' = H(x * signs) per block of each of the M rows (cq.c). */
void cn_cq_rotate(const float *x, int64_t M, int64_t K, const float *signs, int64_t block, float *out);

/* CQ decode with int8 activations (cq_i8.c; cq_vbmi.c on AVX-512 VBMI + VNNI).
 * x is quantized per scale group into chunks of 64 codes: xq holds, for group
 * g and chunk c, component e's 64 values at ((g * nch + c) * d + e) * 64
 * (d here is cn_cq_i8_xdim: 2 for 4-bit scalar codes), zero past the group's
 * end; xf[g] = x scale * codebook scale; xsum[g] is the sum of the group's
 * int8 values. */
typedef struct {
    const int8_t *xq;
    const float *xf;
    const int32_t *xsum;
    const uint8_t *codes;
    int64_t stride;
    const uint16_t *scales;
    int64_t K, group, nch;
    int bits, d; /* bits per code, components per codebook vector (see cn_cq_i8_codes) */
    const int8_t *cbq; /* [d][1 << bits] */
    const float *bias;
    float *y;
} cn_cq_i8_args;
/* The layouts the int8-activation decode runs: 8- and 6-bit codes of 2- and
 * 4-vectors (CQ3, CQ2, and CQ4 before session 12), 6- and 5-bit codes of
 * scalars (the cq6 / cq5 output heads) and 4-bit ones (CQ4), with groups of
 * whole 4-code runs (and whole bytes of 5-bit codes: runs of eight). */
CN_INLINE int cn_cq_i8_codes(int bits, int d) {
    return ((bits == 8 || bits == 6) && (d == 2 || d == 4)) || ((bits == 6 || bits == 5 || bits == 4) && d == 1);
}
/* Components of x's int8 layout for a weight layout: a byte of 4-bit scalar
 * codes holds an even and an odd input (low and high nibble), so x is laid
 * out as for 2-vectors, even inputs then odd ones per chunk, and the two
 * nibbles of a byte meet their x with no shuffle. */
CN_INLINE int cn_cq_i8_xdim(int bits, int d) { return bits == 4 && d == 1 ? 2 : d; }
CN_INLINE int cn_cq_i8_layout(int bits, int d, int64_t group, int64_t K) {
    const int64_t run = bits == 5 ? 8 : 4 * d;
    return cn_cq_i8_codes(bits, d) && group >= run && group % run == 0 && K % group == 0;
}
int cn_cq_i8_avx512_usable(int bits, int d);
/* 4-, 5- and 6-bit codes of scalars (CQ4, the cq6 / cq5 heads) and 6-bit codes
 * of 2-vectors (CQ3) on AVX2 without AVX-512 VBMI (cq_i8_avx2.c); CQ4's int8 codebook is at most 63 in magnitude
 * (cn_cq_i8_cb_limit). */
int cn_cq_i8_avx2_usable(int bits, int d);
void cn_cq_i8_avx2_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1);

/* 16 codes (count of them, a multiple of 4, of 8 for 5-bit codes; the rest
 * read as 0) as bytes, of 4, 5, 6 or 8 bits.  6-bit codes: each 3-byte group goes to a 32-bit lane,
 * and its four fields are shifted into the lane's four bytes; 5-bit codes the
 * same with 5-byte groups of eight in 64-bit lanes. */
CN_INLINE uint8x16_t cn_cq_codes16(const uint8_t *row, int64_t v, int64_t count, const int bits) {
    uint8_t buf[16] = {0};
    if (bits == 4) { /* two codes a byte, low nibble first */
        memcpy(buf, row + v / 2, (size_t)(count / 2));
        const uint8x8_t b = vld1_u8(buf);
        const uint8x8x2_t z = vzip_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4));
        return vcombine_u8(z.val[0], z.val[1]);
    }
    if (bits == 8) {
        if (count == 16) return vld1q_u8(row + v);
        memcpy(buf, row + v, (size_t)count);
        return vld1q_u8(buf);
    }
    if (bits == 5) {
        memcpy(buf, row + 5 * (v / 8), (size_t)(5 * count / 8));
        static const uint8_t spread5[16] = {0, 1, 2, 3, 4, 255, 255, 255, 5, 6, 7, 8, 9, 255, 255, 255};
        const uint64x2_t w = vreinterpretq_u64_u8(vqtbl1q_u8(vld1q_u8(buf), vld1q_u8(spread5)));
        uint64x2_t r = vandq_u64(w, vdupq_n_u64(31)); /* field j (bit 5j) moves to bit 8j */
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 3), vdupq_n_u64(31ull << 8)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 6), vdupq_n_u64(31ull << 16)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 9), vdupq_n_u64(31ull << 24)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 12), vdupq_n_u64(31ull << 32)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 15), vdupq_n_u64(31ull << 40)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 18), vdupq_n_u64(31ull << 48)));
        r = vorrq_u64(r, vandq_u64(vshlq_n_u64(w, 21), vdupq_n_u64(31ull << 56)));
        return vreinterpretq_u8_u64(r);
    }
    memcpy(buf, row + 3 * (v / 4), (size_t)(3 * count / 4)); /* never reads past the row */
    static const uint8_t spread[16] = {0, 1, 2, 255, 3, 4, 5, 255, 6, 7, 8, 255, 9, 10, 11, 255};
    const uint32x4_t w = vreinterpretq_u32_u8(vqtbl1q_u8(vld1q_u8(buf), vld1q_u8(spread)));
    uint32x4_t r = vandq_u32(w, vdupq_n_u32(63));
    r = vorrq_u32(r, vandq_u32(vshlq_n_u32(w, 2), vdupq_n_u32(0x3f00)));
    r = vorrq_u32(r, vandq_u32(vshlq_n_u32(w, 4), vdupq_n_u32(0x3f0000)));
    r = vorrq_u32(r, vandq_u32(vshlq_n_u32(w, 6), vdupq_n_u32(0x3f000000)));
    return vreinterpretq_u8_u32(r);
}

/* One-row decode of n <= CN_MULTI_MAX weights (all with cb_q8) into y, as
 * cn_cq_linear_multi lays it out, in one parallel region (cq_i8.c). */
#define CN_MULTI_MAX 8
/* Several weights' work as one parallel range: part i owns units [end[i - 1], end[i])
 * and runs fn[i](ctx[i], ...) on its own offsets (runtime.c; the fused calls of cq.c,
 * cq_i8.c and linear.c). */
typedef struct {
    cn_range_fn fn[CN_MULTI_MAX];
    const void *ctx[CN_MULTI_MAX];
    int64_t end[CN_MULTI_MAX];
    int n;
} cn_multi_range;
void cn_multi_range_run(const void *c, int64_t u0, int64_t u1);
int cn_cq_i8_multi(const float *x, int64_t K, int n, const cn_cq_weight *w, float *y);
/* One-row float32 / float16 / bfloat16 products of n weights (K > 0, valid
 * wtypes) in one parallel region, laid out as cn_linear_multi (linear.c). */
void cn_linear_gemv_multi(const float *x, int64_t K, int n, const cn_float_weight *w, float *y);
/* The exact one-row decode of the same, x already rotated (cq.c). */
int cn_cq_gemv_multi(const float *x, int64_t K, int n, const cn_cq_weight *w, float *y);
void cn_cq_i8_avx512_rows(const cn_cq_i8_args *a, int64_t n0, int64_t n1);

/* Prefill microkernel for packed 32-row weight panels (gemm_avx512.c): y[:, n0:n0+32]
 * (+)= x[:, k0:k0+kc] @ panel, on AVX-512 or AVX2 + FMA (cn_gemm_panels_available());
 * elsewhere it does nothing.  cn_gemm_avx512_available() is 1 only on AVX-512
 * builds, where the float decode loop cn_gemv_avx512 runs too. */
int cn_gemm_avx512_available(void);
/* Whether the packed-panel prefill runs here: AVX-512, or AVX2 + FMA with a 6 x 16 tile. */
int cn_gemm_panels_available(void);
void cn_gemm_panel_avx512(const float *x, int64_t M, int64_t K, int64_t k0, int64_t kc,
                          const float *panel, float *y, int64_t N, int64_t n0, int accumulate);
/* Writes weights [k0, k1) of row n to out[k - k0]. */
typedef void (*cn_panel_fill)(const void *ctx, int64_t n, int64_t k0, int64_t k1, float *out);
/* y (M, N) = x (M, K) @ w.T + bias over output panels [p0, p1) of 32 rows of w,
 * decoded kc_max inputs at a time by fill; cn_gemm_panels_fit says whether
 * a panel can be allocated (check before running it on threads). */
void cn_gemm_panels(const float *x, int64_t M, int64_t K, int64_t N, const float *bias, float *y,
                    int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1);
int cn_gemm_panels_fit(int64_t kc_max);
/* The same with bfloat16 products where available() (AVX512_BF16): xb is x
 * rounded to bfloat16 by cn_to_bf16, K and kc_max even.  Not exact. */
void cn_to_bf16(const float *x, int64_t n, uint16_t *out);
void cn_gemm_panels_bf16(const float *x, const uint16_t *xb, int64_t M, int64_t K, int64_t N, const float *bias,
                         float *y, int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1);
/* AMX tiles for the bfloat16 panels (gemm_amx.c): begin loads the tile layout in the
 * calling thread (0: no AMX here, use the AVX-512 tile), end releases it; rows runs the
 * first 16-row blocks of y[:, n0:n0+32] (+)= xb[:, k0:k0+kc] @ panel16 (kc a multiple of
 * 32) and returns how many rows it did. */
int cn_amx_begin(void);
void cn_amx_end(void);
int64_t cn_amx_rows(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc, const uint32_t *panel16,
                    float *y, int64_t N, int64_t n0, int accumulate);
/* Decode rows [n0, n1) of a float32/float16/bfloat16 matrix on AVX-512 (gemm_avx512.c). */
void cn_gemv_avx512(const float *x, int64_t K, const void *w, int wt, const float *bias, float *y, int64_t n0,
                    int64_t n1);

/* Row-path attention on AVX-512 (attention_avx512.c; available() 0 elsewhere):
 * p[g * S + j] = scale * (qr[g] . key j) for keys [0, n) of kb (prefetching
 * the values vb of the same keys), and
 * orow[g] += sum_j p[g * S + j] * value j. */
int cn_attn_avx512_available(void);
void cn_attn_scores_avx512(const float *const *qr, int64_t G, const void *kb, const void *vb, int kt, int64_t n,
                           int64_t d, float scale, float *p, int64_t S);
void cn_attn_values_avx512(float *const *orow, int64_t G, const void *vb, int kt, int64_t n, int64_t d,
                           const float *p, int64_t S);

/* int4 / int8 decode rows [n0, n1) on AVX-512 (affine_avx512.c); usable() is 0
 * where the build does not target it or for groups that are not a multiple of 32. */
int cn_affine_avx512_usable(int bits, int64_t group);
void cn_affine_gemv_avx512(const float *x, const float *xe, const float *xo, const float *xsum, int64_t K,
                           const uint8_t *codes, int bits, const uint16_t *scales, const uint16_t *biases,
                           int64_t group, const float *bias, float *y, int64_t n0, int64_t n1);

/* In-place orthonormal Walsh-Hadamard transform of one block of bs values (rowwise.c). */
void cn_fwht_block(float *v, int64_t bs);
/* The same on AVX-512 (prologue_avx512.c), bit for bit; 0 when it does not
 * apply (no AVX-512, or bs not a power of two >= 32) and v is untouched. */
int cn_fwht_avx512(float *v, int64_t bs);
/* x * signs rotated per block of bs into out (cq.c's rotation of one row), the same way. */
int cn_rotate_avx512(const float *x, const float *signs, int64_t K, int64_t bs, float *out);
/* rowwise.c's SiLU (times up[i] when up is given) on AVX-512, bit for bit,
 * over a whole number of 16-float vectors: returns how many values it did. */
int64_t cn_silu_avx512(const float *x, const float *up, float *out, int64_t n);
/* cq_i8.c's quantization of x on AVX-512 (prologue_avx512.c), bit for bit;
 * 0 when it does not apply (no AVX-512, or groups not whole 16-code runs). */
int cn_cq_quantize_x_avx512(const float *x, int64_t K, int64_t group, int d, float cb_scale, int8_t *xq, float *xf,
                            int32_t *xsum);

/* Softmax of one row in place or out of place (rowwise.c); an all -inf row gives zeros. */
void cn_softmax_row(const float *x, float *out, int64_t n);

/* ---- vector math -------------------------------------------------------- */

/* exp(x): x = n*ln2 + r with |r| <= ln2/2, e^r by its degree-7 Taylor
 * polynomial (truncation error ~1e-8), 2^n assembled in the exponent field
 * as 2^(n-1) * 2 so that n = 128 (x up to 88.72) still fits.  Below -86.6
 * the result is 0 (true value < 2.4e-38), above 88.72 it is +inf. */
CN_INLINE float32x4_t cn_exp(float32x4_t x) {
    uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(-86.6f));
    uint32x4_t huge = vcgtq_f32(x, vdupq_n_f32(88.72f));
    x = vmaxq_f32(vminq_f32(x, vdupq_n_f32(88.72f)), vdupq_n_f32(-86.6f));
    float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
    float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
    r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
    float32x4_t p = vdupq_n_f32(1.0f / 5040.0f);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 720.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 120.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 24.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f / 6.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(0.5f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    p = vfmaq_f32(vdupq_n_f32(1.0f), p, r);
    int32x4_t e = vshlq_n_s32(vaddq_s32(vcvtq_s32_f32(n), vdupq_n_s32(126)), 23);
    float32x4_t y = vmulq_f32(vmulq_f32(p, vreinterpretq_f32_s32(e)), vdupq_n_f32(2.0f));
    y = vbslq_f32(huge, vdupq_n_f32(INFINITY), y);
    return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), tiny));
}

/* tanh(x): an odd Taylor polynomial near zero (where 1 - 2/(e^2x + 1)
 * would cancel), the exp form elsewhere. */
CN_INLINE float32x4_t cn_tanh(float32x4_t x) {
    float32x4_t ax = vabsq_f32(x);
    float32x4_t e = cn_exp(vmulq_f32(ax, vdupq_n_f32(2.0f)));
    float32x4_t big = vsubq_f32(vdupq_n_f32(1.0f),
                                vdivq_f32(vdupq_n_f32(2.0f), vaddq_f32(e, vdupq_n_f32(1.0f))));
    float32x4_t x2 = vmulq_f32(x, x);
    float32x4_t p = vdupq_n_f32(62.0f / 2835.0f);
    p = vfmaq_f32(vdupq_n_f32(-17.0f / 315.0f), p, x2);
    p = vfmaq_f32(vdupq_n_f32(2.0f / 15.0f), p, x2);
    p = vfmaq_f32(vdupq_n_f32(-1.0f / 3.0f), p, x2);
    float32x4_t small = vfmaq_f32(x, vmulq_f32(p, x2), x);
    /* big carries |x|: put the sign of x back. */
    uint32x4_t signbit = vandq_u32(vreinterpretq_u32_f32(x), vdupq_n_u32(0x80000000u));
    big = vreinterpretq_f32_u32(vorrq_u32(vreinterpretq_u32_f32(big), signbit));
    return vbslq_f32(vcltq_f32(ax, vdupq_n_f32(0.25f)), small, big);
}

/* erfc(z) for any z: the Chebyshev fit t*exp(-z^2 + P(t)), t = 1/(1+|z|/2),
 * whose relative error is below 1.2e-7 everywhere (Press et al., Numerical
 * Recipes 6.2), with erfc(-z) = 2 - erfc(z).  z^2 comes in as hi + lo (an
 * exact split): in the far tail z^2 ~ 100 and its rounding alone would cost
 * 1e-5 relative error, and relative accuracy there is what keeps exact GELU
 * accurate for large negative inputs. */
CN_INLINE float32x4_t cn_erfc_core(float32x4_t z, float32x4_t z2hi, float32x4_t z2lo) {
    float32x4_t az = vabsq_f32(z);
    float32x4_t t = vdivq_f32(vdupq_n_f32(1.0f),
                              vfmaq_f32(vdupq_n_f32(1.0f), az, vdupq_n_f32(0.5f)));
    float32x4_t p = vdupq_n_f32(0.17087277f);
    p = vfmaq_f32(vdupq_n_f32(-0.82215223f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.48851587f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-1.13520398f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.27886807f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-0.18628806f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.09678418f), p, t);
    p = vfmaq_f32(vdupq_n_f32(0.37409196f), p, t);
    p = vfmaq_f32(vdupq_n_f32(1.00002368f), p, t);
    p = vfmaq_f32(vdupq_n_f32(-1.26551223f), p, t);
    /* exp(p - hi - lo) = exp(p - hi) * (1 - lo), lo being tiny. */
    float32x4_t e = vmulq_f32(cn_exp(vsubq_f32(p, z2hi)), vsubq_f32(vdupq_n_f32(1.0f), z2lo));
    float32x4_t r = vmulq_f32(t, e);
    return vbslq_f32(vcltq_f32(z, vdupq_n_f32(0.0f)), vsubq_f32(vdupq_n_f32(2.0f), r), r);
}

CN_INLINE float32x4_t cn_erfc(float32x4_t z) {
    float32x4_t hi = vmulq_f32(z, z);
    return cn_erfc_core(z, hi, vfmaq_f32(vnegq_f32(hi), z, z));
}

/* Exact GELU, 0.5 x erfc(-x/sqrt2), with z^2 = x^2/2 split from x itself so
 * the rounding of x/sqrt2 never reaches the exponent. */
CN_INLINE float32x4_t cn_gelu(float32x4_t x) {
    float32x4_t xx = vmulq_f32(x, x), half = vdupq_n_f32(0.5f);
#if CN_NATIVE || defined(__FMA__)
    float32x4_t lo = vfmaq_f32(vnegq_f32(xx), x, x); /* exact: one rounding */
#else
    /* No fused multiply-add (SIMDe then rounds twice): Veltkamp-split x into
     * 12-bit halves so every partial product below is exact. */
    float32x4_t big = vmulq_f32(x, vdupq_n_f32(4097.0f));
    float32x4_t hi = vsubq_f32(big, vsubq_f32(big, x)), xlo = vsubq_f32(x, hi);
    float32x4_t lo = vsubq_f32(vmulq_f32(hi, hi), xx);
    lo = vaddq_f32(lo, vmulq_f32(vaddq_f32(hi, hi), xlo));
    lo = vaddq_f32(lo, vmulq_f32(xlo, xlo));
#endif
    /* Where x^2 overflows the split is inf - inf; GELU is x or 0 there anyway. */
    lo = vbslq_f32(vcltq_f32(vabsq_f32(x), vdupq_n_f32(1e18f)), lo, vdupq_n_f32(0.0f));
    float32x4_t z = vmulq_f32(x, vdupq_n_f32(-0.7071067811865476f));
    return vmulq_f32(vmulq_f32(half, x), cn_erfc_core(z, vmulq_f32(xx, half), vmulq_f32(lo, half)));
}

#endif
