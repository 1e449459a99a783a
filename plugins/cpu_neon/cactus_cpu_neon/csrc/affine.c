/* linear on int4 / int8 affine-group weights (cactus_core.formats.Int4Tensor,
 * Int8Tensor: RTN and GPTQ): w[o, i] = scales[o, g] * q[o, i] + biases[o, g],
 * g = i // group, q unsigned, int4 packed two per byte with the low nibble
 * first, scales and biases float16.
 *
 * Per group the bias term is biases[o, g] * sum(x over the group), and those
 * sums are shared by every row, so decode computes them once per call; each
 * row then needs only scale * dot(q, x).  For int4, x is also split once into
 * its even and odd elements, which pair with the low and high nibbles of a
 * byte, so the nibbles are used in the order they are stored.  Prefill
 * dequantizes four rows into a float panel for the float GEMM tile.  On
 * AVX-512 builds decode runs in affine_avx512.c and prefill through the
 * packed-panel GEMM of gemm_avx512.c. */
#include "neon_common.h"

typedef struct {
    const float *x; /* (M, K) */
    const float *xe, *xo; /* int4 decode: x[0::2] and x[1::2] */
    const float *xsum; /* decode: sum of x over each group */
    int64_t M, K, N, group, stride;
    const uint8_t *codes;
    const uint16_t *scales, *biases;
    const float *bias;
    float *y;
} affine_args;

/* Four float32x4 from 16 unsigned bytes, in order.  Zips with zero widen
 * (little-endian lanes): one instruction each on NEON and on SSE, where
 * SIMDe's emulation of vmovl is several; the values fit a signed int, whose
 * convert is native on both. */
CN_INLINE void u8x16_to_f32(uint8x16_t v, float32x4_t f[4]) {
    const uint8x16_t z8 = vdupq_n_u8(0);
    const uint16x8_t z16 = vdupq_n_u16(0);
    uint16x8_t lo = vreinterpretq_u16_u8(vzip1q_u8(v, z8));
    uint16x8_t hi = vreinterpretq_u16_u8(vzip2q_u8(v, z8));
    f[0] = vcvtq_f32_s32(vreinterpretq_s32_u16(vzip1q_u16(lo, z16)));
    f[1] = vcvtq_f32_s32(vreinterpretq_s32_u16(vzip2q_u16(lo, z16)));
    f[2] = vcvtq_f32_s32(vreinterpretq_s32_u16(vzip1q_u16(hi, z16)));
    f[3] = vcvtq_f32_s32(vreinterpretq_s32_u16(vzip2q_u16(hi, z16)));
}

/* dot(q, x) over one group of row n starting at input index i0. */
CN_INLINE float group_dot(const affine_args *a, const uint8_t *row, int64_t i0, const int bits) {
    float32x4_t acc[4];
    for (int t = 0; t < 4; t++) acc[t] = vdupq_n_f32(0);
    int64_t i = i0, end = i0 + a->group;
    if (bits == 4) {
        for (; i + 32 <= end; i += 32) { /* 16 bytes = 32 weights */
            uint8x16_t v = vld1q_u8(row + i / 2);
            float32x4_t lo[4], hi[4];
            u8x16_to_f32(vandq_u8(v, vdupq_n_u8(15)), lo);
            u8x16_to_f32(vshrq_n_u8(v, 4), hi);
            for (int t = 0; t < 4; t++) {
                acc[t] = vfmaq_f32(acc[t], lo[t], vld1q_f32(a->xe + i / 2 + 4 * t));
                acc[t] = vfmaq_f32(acc[t], hi[t], vld1q_f32(a->xo + i / 2 + 4 * t));
            }
        }
    } else {
        for (; i + 16 <= end; i += 16) {
            float32x4_t q[4];
            u8x16_to_f32(vld1q_u8(row + i), q);
            for (int t = 0; t < 4; t++) acc[t] = vfmaq_f32(acc[t], q[t], vld1q_f32(a->x + i + 4 * t));
        }
    }
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < end; i++) {
        uint32_t q = bits == 4 ? (row[i / 2] >> ((i & 1) * 4)) & 15u : row[i];
        s += (float)q * a->x[i];
    }
    return s;
}

CN_INLINE void affine_gemv_rows(const affine_args *a, int64_t n0, int64_t n1, const int bits) {
    const int64_t groups = a->K / a->group;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * groups, *bi = a->biases + n * groups;
        float total = a->bias ? a->bias[n] : 0.0f;
        for (int64_t g = 0; g < groups; g++)
            total += cn_f16_scalar(sc[g]) * group_dot(a, row, g * a->group, bits) +
                     cn_f16_scalar(bi[g]) * a->xsum[g];
        a->y[n] = total;
    }
}

/* Row n dequantized into out[0, K). */
CN_INLINE void affine_row_dequant(const affine_args *a, int64_t n, float *out, const int bits) {
    const int64_t groups = a->K / a->group;
    const uint8_t *row = a->codes + n * a->stride;
    for (int64_t g = 0; g < groups; g++) {
        const float s = cn_f16_scalar(a->scales[n * groups + g]);
        const float b = cn_f16_scalar(a->biases[n * groups + g]);
        for (int64_t i = g * a->group; i < (g + 1) * a->group; i++) {
            uint32_t q = bits == 4 ? (row[i / 2] >> ((i & 1) * 4)) & 15u : row[i];
            out[i] = (float)q * s + b;
        }
    }
}

CN_INLINE void affine_gemm_tiles(const affine_args *a, int64_t t0, int64_t t1, const int bits) {
    const int64_t M = a->M, K = a->K, N = a->N, mtiles = (M + 3) / 4;
    float *panel = (float *)malloc(sizeof(float) * 4 * (size_t)K);
    for (int64_t t = t0; t < t1; t++) {
        const float *wr[4];
        for (int j = 0; j < 4; j++) {
            wr[j] = panel + j * K;
            affine_row_dequant(a, CN_MIN(4 * t + j, N - 1), panel + j * K, bits);
        }
        for (int64_t mt = 0; mt < mtiles; mt++) {
            const float *xr[4];
            for (int i = 0; i < 4; i++) xr[i] = a->x + CN_MIN(4 * mt + i, M - 1) * K;
            float acc[4][4];
            cn_tile4x4_f32(xr, wr, 0, K, acc);
            for (int i = 0; i < 4 && 4 * mt + i < M; i++)
                for (int j = 0; j < 4 && 4 * t + j < N; j++)
                    a->y[(4 * mt + i) * N + 4 * t + j] = acc[i][j] + (a->bias ? a->bias[4 * t + j] : 0.0f);
        }
    }
    free(panel);
}

/* Prefill on AVX-512 (gemm_avx512.c): weights [k0, k1) of row n, dequantized. */
CN_INLINE void affine_fill_row(const affine_args *a, int64_t n, int64_t k0, int64_t k1, float *out,
                                  const int bits) {
    const int64_t groups = a->K / a->group;
    const uint8_t *row = a->codes + n * a->stride;
    for (int64_t g0 = k0; g0 < k1;) {
        const int64_t g = g0 / a->group, gend = CN_MIN(k1, (g + 1) * a->group);
        const float s = cn_f16_scalar(a->scales[n * groups + g]), b = cn_f16_scalar(a->biases[n * groups + g]);
        for (int64_t i = g0; i < gend; i++) {
            uint32_t q = bits == 4 ? (row[i / 2] >> ((i & 1) * 4)) & 15u : row[i];
            out[i - k0] = (float)q * s + b;
        }
        g0 = gend;
    }
}

static void fill4b(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    affine_fill_row(c, n, k0, k1, out, 4);
}
static void fill8b(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    affine_fill_row(c, n, k0, k1, out, 8);
}
static void panels4b(const void *c, int64_t p0, int64_t p1) {
    const affine_args *a = c;
    cn_gemm_panels(a->x, a->M, a->K, a->N, a->bias, a->y, 256, fill4b, a, p0, p1);
}
static void panels8b(const void *c, int64_t p0, int64_t p1) {
    const affine_args *a = c;
    cn_gemm_panels(a->x, a->M, a->K, a->N, a->bias, a->y, 256, fill8b, a, p0, p1);
}

static void gemv_avx512(const void *c, int64_t n0, int64_t n1) {
    const affine_args *a = c;
    cn_affine_gemv_avx512(a->x, a->xe, a->xo, a->xsum, a->K, a->codes, (int)(8 * a->stride / a->K), a->scales,
                          a->biases, a->group, a->bias, a->y, n0, n1);
}

static void gemv4b(const void *c, int64_t a, int64_t b) { affine_gemv_rows(c, a, b, 4); }
static void gemv8b(const void *c, int64_t a, int64_t b) { affine_gemv_rows(c, a, b, 8); }
static void gemm4b(const void *c, int64_t a, int64_t b) { affine_gemm_tiles(c, a, b, 4); }
static void gemm8b(const void *c, int64_t a, int64_t b) { affine_gemm_tiles(c, a, b, 8); }

int cn_affine_linear(const float *x, int64_t M, int64_t K, const uint8_t *codes, int bits,
                     const uint16_t *scales, const uint16_t *biases, int64_t group, int64_t N,
                     const float *bias, float *y) {
    if ((bits != 4 && bits != 8) || group <= 0 || K % group || (bits == 4 && group % 2)) return -1;
    if (M <= 0 || N <= 0) return 0;
    affine_args a = {x, NULL, NULL, NULL, M, K, N, group, K * bits / 8, codes, scales, biases, bias, y};
    if (M > 1) {
        if (cn_gemm_panels_available() && cn_gemm_panels_fit(256))
            cn_parallel_for((N + 31) / 32, M * N * K, bits == 4 ? panels4b : panels8b, &a);
        else
            cn_parallel_for((N + 3) / 4, M * N * K, bits == 4 ? gemm4b : gemm8b, &a);
        return 0;
    }
    float *scratch = (float *)malloc(sizeof(float) * (size_t)(K + K / group + 1));
    float *xsum = scratch + K;
    for (int64_t g = 0; g < K / group; g++) {
        float s = 0.0f;
        for (int64_t i = g * group; i < (g + 1) * group; i++) s += x[i];
        xsum[g] = s;
    }
    if (bits == 4) {
        float *xe = scratch, *xo = scratch + K / 2;
        for (int64_t j = 0; j < K / 2; j++) {
            xe[j] = x[2 * j];
            xo[j] = x[2 * j + 1];
        }
        a.xe = xe;
        a.xo = xo;
    }
    a.xsum = xsum;
    const cn_range_fn gemv = cn_affine_avx512_usable(bits, group) ? gemv_avx512 : bits == 4 ? gemv4b : gemv8b;
    cn_parallel_for(N, N * K, gemv, &a);
    free(scratch);
    return 0;
}

/* ---- embedding lookup --------------------------------------------------- */

typedef struct {
    const uint8_t *codes;
    const uint16_t *scales, *biases;
    const int64_t *ids;
    int64_t D, group, stride;
    int bits;
    float *out;
} affine_embed_args;

static void affine_embed_rows(const void *c, int64_t i0, int64_t i1) {
    const affine_embed_args *a = c;
    const int64_t ng = a->D / a->group;
    for (int64_t i = i0; i < i1; i++) {
        const int64_t n = a->ids[i];
        const uint8_t *row = a->codes + n * a->stride;
        float *o = a->out + i * a->D;
        for (int64_t g = 0; g < ng; g++) {
            const float s = cn_f16_scalar(a->scales[n * ng + g]), b = cn_f16_scalar(a->biases[n * ng + g]);
            for (int64_t k = g * a->group; k < (g + 1) * a->group; k++) {
                const unsigned q = a->bits == 8 ? row[k] : (row[k >> 1] >> ((k & 1) * 4)) & 15u;
                o[k] = (float)q * s + b;
            }
        }
    }
}

int cn_affine_embedding(const uint8_t *codes, int bits, const uint16_t *scales, const uint16_t *biases,
                        int64_t group, int64_t vocab, int64_t D, const int64_t *ids, int64_t n, float *out) {
    if ((bits != 4 && bits != 8) || group <= 0 || D % group) return -1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) return -3;
    affine_embed_args a = {codes, scales, biases, ids, D, group, (D * bits + 7) / 8, bits, out};
    cn_parallel_for(n, n * D * 4, affine_embed_rows, &a);
    return 0;
}
