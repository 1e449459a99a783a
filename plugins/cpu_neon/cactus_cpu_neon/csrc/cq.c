/* linear on CQ weights (cactus_core.formats.CQTensor, docs/formats.md), and
 * embedding rows of CQ tables.
 *
 * A CQ row is a stream of index_bits-bit codes, each naming a vec_dim-vector
 * of the codebook, with one float16 scale per group_size inputs; the matrix
 * lives in a rotated domain, so x is rotated first (x' = H(x * signs), done
 * here once per call and shared by every row).
 *
 * Decode (M == 1) fuses the lookup into the dot product: the codebook is
 * tiny (256 x 2 floats = 2 KiB) and stays in L1, so each code costs a byte
 * load and a 64- or 128-bit table load feeding an FMA, and the only memory
 * traffic is the codes themselves: ~4.1 bits per weight for CQ4.  Four rows
 * go together; on AVX-512 VBMI builds cq_vbmi.c replaces the gather.
 * Prefill (M > 1) dequantizes four rows at a time into a per-thread float32
 * panel and runs the float GEMM microkernel over it, or on AVX-512 builds
 * decodes 32-row panels for gemm_avx512.c (with bfloat16 products when the
 * caller asks and the CPU has them).  Decode with int8 activations, the
 * inexact fast path, lives in cq_i8.c. */
#include "neon_common.h"

typedef struct {
    const float *x; /* rotated activations (M, K) */
    int64_t M, K, N;
    const uint8_t *codes;
    int64_t stride; /* bytes per code row */
    const uint16_t *scales; /* float16 (N, K / group) */
    int64_t group;
    const float *cb; /* codebook widened to float32, (1 << bits, d) */
    const float *bias;
    float *y;
    int bits, d; /* read by the generic (unspecialised) variant and the VBMI path */
    const uint8_t (*planes)[256]; /* VBMI prefill: the codebook's byte planes */
    const uint16_t *xb; /* bfloat16 prefill: x rounded to bfloat16, else NULL */
} cq_args;

/* Code j of a row: bits [j*bits, (j+1)*bits) of a little-endian bit stream. */
CN_INLINE uint32_t cq_code(const uint8_t *row, int64_t j, const int bits) {
    if (bits == 8) return row[j];
    if (bits == 4) return (row[j >> 1] >> ((j & 1) * 4)) & 15u;
    const int64_t pos = j * bits;
    const int shift = (int)(pos & 7);
    const uint8_t *p = row + (pos >> 3);
    uint32_t v = p[0]; /* read only the bytes the code touches: rows are packed */
    if (shift + bits > 8) v |= (uint32_t)p[1] << 8;
    if (shift + bits > 16) v |= (uint32_t)p[2] << 16;
    return (v >> shift) & ((1u << bits) - 1u);
}

/* Codes v .. v+3.  6-bit codes come four to three bytes, so one 24-bit
 * read yields all four when v is a multiple of 4 (every group start is);
 * four 5-bit codes are 20 bits from bit 0 or 4 of a byte, also one read. */
CN_INLINE void cq_codes4(const uint8_t *row, int64_t v, const int bits, uint32_t c[4]) {
    if (bits == 5 && (v & 3) == 0) {
        const uint8_t *p = row + (5 * v >> 3);
        const uint32_t w = (p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16) >> (5 * v & 7);
        for (int i = 0; i < 4; i++) c[i] = (w >> (5 * i)) & 31u;
        return;
    }
    if (bits == 6 && (v & 3) == 0) {
        const uint8_t *p = row + 3 * (v >> 2);
        const uint32_t w = p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
        c[0] = w & 63u;
        c[1] = (w >> 6) & 63u;
        c[2] = (w >> 12) & 63u;
        c[3] = w >> 18;
        return;
    }
    for (int i = 0; i < 4; i++) c[i] = cq_code(row, v + i, bits);
}

/* Scalar codebook entries of four codes as one vector. */
CN_INLINE float32x4_t cq_quad(const float *cb, const uint32_t c[4]) {
    const float w[4] = {cb[c[0]], cb[c[1]], cb[c[2]], cb[c[3]]};
    return vld1q_f32(w);
}

/* sum over vectors [v0, v1) of cb[code(v)] . x[v*d : v*d + d] */
CN_INLINE float cq_dot_span(const uint8_t *row, const float *x, const float *cb, int64_t v0,
                            int64_t v1, const int bits, const int d) {
    float32x4_t a0 = vdupq_n_f32(0), a1 = a0;
    int64_t v = v0;
    if (d == 2) {
        for (; v + 4 <= v1; v += 4) {
            uint32_t c[4];
            cq_codes4(row, v, bits, c);
            float32x4_t w0 = vcombine_f32(vld1_f32(cb + 2 * c[0]), vld1_f32(cb + 2 * c[1]));
            float32x4_t w1 = vcombine_f32(vld1_f32(cb + 2 * c[2]), vld1_f32(cb + 2 * c[3]));
            a0 = vfmaq_f32(a0, w0, vld1q_f32(x + 2 * v));
            a1 = vfmaq_f32(a1, w1, vld1q_f32(x + 2 * v + 4));
        }
    } else if (d == 1) {
        for (; v + 8 <= v1; v += 8) {
            uint32_t c[4], e[4];
            cq_codes4(row, v, bits, c);
            cq_codes4(row, v + 4, bits, e);
            a0 = vfmaq_f32(a0, cq_quad(cb, c), vld1q_f32(x + v));
            a1 = vfmaq_f32(a1, cq_quad(cb, e), vld1q_f32(x + v + 4));
        }
    } else if (d == 4) {
        for (; v + 2 <= v1; v += 2) {
            a0 = vfmaq_f32(a0, vld1q_f32(cb + 4 * cq_code(row, v, bits)), vld1q_f32(x + 4 * v));
            a1 = vfmaq_f32(a1, vld1q_f32(cb + 4 * cq_code(row, v + 1, bits)), vld1q_f32(x + 4 * v + 4));
        }
    }
    float s = vaddvq_f32(vaddq_f32(a0, a1));
    for (; v < v1; v++) {
        const float *c = cb + (int64_t)d * cq_code(row, v, bits);
        for (int e = 0; e < d; e++) s += c[e] * x[v * d + e];
    }
    return s;
}

CN_INLINE float cq_row_dot(const cq_args *a, int64_t n, const float *x, const int bits, const int d) {
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * (a->K / a->group);
    const int64_t per_group = a->group / d;
    float total = 0.0f;
    for (int64_t g = 0; g < a->K / a->group; g++)
        total += cn_f16_scalar(sc[g]) * cq_dot_span(row, x, a->cb, g * per_group, (g + 1) * per_group, bits, d);
    return total;
}

/* Codebook entry c of a 2-vector codebook, twice: entries c0 and c1 side by side. */
CN_INLINE float32x4_t cq_pair(const float *cb, uint32_t c0, uint32_t c1) {
    return vcombine_f32(vld1_f32(cb + 2 * c0), vld1_f32(cb + 2 * c1));
}

/* Four rows at once for 2- and 4-vector codebooks.  One row at a time was
 * bound by its FMA chain (one code per cycle: each 4-code step waited on the
 * previous FMA); four rows keep eight chains in flight, load x once for all
 * four, and leave the gather of codebook entries (one load per code) as the
 * limit.  Group scales multiply the vector accumulators, so each row needs a
 * single horizontal sum. */
CN_INLINE void cq_gemv4(const cq_args *a, const int64_t n[4], float out[4], const int bits, const int d) {
    const int64_t ng = a->K / a->group, per_group = a->group / d, step = 8 / d;
    const uint8_t *row[4];
    const uint16_t *sc[4];
    float32x4_t tot[4];
    float tail[4] = {0, 0, 0, 0};
    for (int r = 0; r < 4; r++) {
        row[r] = a->codes + n[r] * a->stride;
        sc[r] = a->scales + n[r] * ng;
        tot[r] = vdupq_n_f32(0);
    }
    const float *x = a->x, *cb = a->cb;
    for (int64_t g = 0; g < ng; g++) {
        float32x4_t p[4], q[4];
        for (int r = 0; r < 4; r++) p[r] = q[r] = vdupq_n_f32(0);
        int64_t v = g * per_group;
        const int64_t end = v + per_group;
        for (; v + step <= end; v += step) {
            const float32x4_t x0 = vld1q_f32(x + d * v), x1 = vld1q_f32(x + d * v + 4);
            for (int r = 0; r < 4; r++) {
                if (d == 2) {
                    uint32_t c[4];
                    if (bits == 8) { /* one 32-bit load, bytes split in registers */
                        uint32_t w;
                        memcpy(&w, row[r] + v, 4);
                        c[0] = w & 255u, c[1] = (w >> 8) & 255u, c[2] = (w >> 16) & 255u, c[3] = w >> 24;
                    } else {
                        cq_codes4(row[r], v, bits, c);
                    }
                    p[r] = vfmaq_f32(p[r], cq_pair(cb, c[0], c[1]), x0);
                    q[r] = vfmaq_f32(q[r], cq_pair(cb, c[2], c[3]), x1);
                } else if (d == 1) {
                    uint32_t c[4], e[4];
                    cq_codes4(row[r], v, bits, c);
                    cq_codes4(row[r], v + 4, bits, e);
                    p[r] = vfmaq_f32(p[r], cq_quad(cb, c), x0);
                    q[r] = vfmaq_f32(q[r], cq_quad(cb, e), x1);
                } else {
                    p[r] = vfmaq_f32(p[r], vld1q_f32(cb + 4 * cq_code(row[r], v, bits)), x0);
                    q[r] = vfmaq_f32(q[r], vld1q_f32(cb + 4 * cq_code(row[r], v + 1, bits)), x1);
                }
            }
        }
        for (int r = 0; r < 4; r++) {
            const float s = cn_f16_scalar(sc[r][g]);
            tot[r] = vfmaq_f32(tot[r], vaddq_f32(p[r], q[r]), vdupq_n_f32(s));
            if (v < end) tail[r] += s * cq_dot_span(row[r], x, cb, v, end, bits, d);
        }
    }
    for (int r = 0; r < 4; r++) out[r] = vaddvq_f32(tot[r]) + tail[r];
}

/* Row n dequantized (scales applied) into out[0, K). */
CN_INLINE void cq_row_dequant(const cq_args *a, int64_t n, float *out, const int bits, const int d) {
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * (a->K / a->group);
    const int64_t per_group = a->group / d;
    for (int64_t g = 0; g < a->K / a->group; g++) {
        const float s = cn_f16_scalar(sc[g]);
        int64_t v = g * per_group;
        for (; v + 4 <= (g + 1) * per_group; v += 4) {
            uint32_t c[4];
            cq_codes4(row, v, bits, c);
            for (int i = 0; i < 4; i++)
                for (int e = 0; e < d; e++) out[(v + i) * d + e] = a->cb[(int64_t)d * c[i] + e] * s;
        }
        for (; v < (g + 1) * per_group; v++) {
            const float *c = a->cb + (int64_t)d * cq_code(row, v, bits);
            for (int e = 0; e < d; e++) out[v * d + e] = c[e] * s;
        }
    }
}

CN_INLINE void cq_gemv_rows(const cq_args *a, int64_t n0, int64_t n1, const int bits, const int d) {
    int64_t n = n0;
    if (d == 1 || d == 2 || d == 4)
        for (; n + 4 <= n1; n += 4) {
            const int64_t rows[4] = {n, n + 1, n + 2, n + 3};
            float out[4];
            cq_gemv4(a, rows, out, bits, d);
            for (int r = 0; r < 4; r++) a->y[n + r] = out[r] + (a->bias ? a->bias[n + r] : 0.0f);
        }
    for (; n < n1; n++)
        a->y[n] = cq_row_dot(a, n, a->x, bits, d) + (a->bias ? a->bias[n] : 0.0f);
}

CN_INLINE void cq_gemm_tiles(const cq_args *a, int64_t t0, int64_t t1, const int bits, const int d) {
    const int64_t M = a->M, K = a->K, N = a->N, mtiles = (M + 3) / 4;
    float *panel = (float *)malloc(sizeof(float) * 4 * (size_t)K);
    for (int64_t t = t0; t < t1; t++) {
        const float *wr[4];
        for (int j = 0; j < 4; j++) {
            wr[j] = panel + j * K;
            cq_row_dequant(a, CN_MIN(4 * t + j, N - 1), panel + j * K, bits, d);
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

/* Weights [k0, k1) of row n, scaled, to out[k - k0]: one row of a panel for
 * the AVX-512 prefill kernel. */
CN_INLINE void cq_dequant_row(const cq_args *a, int64_t n, int64_t k0, int64_t k1, float *out,
                                 const int bits, const int d) {
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * (a->K / a->group);
    for (int64_t g0 = k0; g0 < k1;) {
        const int64_t g = g0 / a->group, gend = CN_MIN(k1, (g + 1) * a->group);
        const float s = cn_f16_scalar(sc[g]);
        int64_t v = g0 / d;
        if (d == 2) /* four codes, eight weights, two vector stores */
            for (; v + 4 <= gend / d; v += 4) {
                uint32_t c[4];
                cq_codes4(row, v, bits, c);
                vst1q_f32(out + 2 * v - k0, vmulq_f32(cq_pair(a->cb, c[0], c[1]), vdupq_n_f32(s)));
                vst1q_f32(out + 2 * v + 4 - k0, vmulq_f32(cq_pair(a->cb, c[2], c[3]), vdupq_n_f32(s)));
            }
        if (d == 1)
            for (; v + 4 <= gend; v += 4) {
                uint32_t c[4];
                cq_codes4(row, v, bits, c);
                vst1q_f32(out + v - k0, vmulq_f32(cq_quad(a->cb, c), vdupq_n_f32(s)));
            }
        for (; v < gend / d; v++) {
            const float *c = a->cb + (int64_t)d * cq_code(row, v, bits);
            for (int e = 0; e < d; e++) out[v * d + e - k0] = c[e] * s;
        }
        g0 = gend;
    }
}

/* Prefill on AVX-512 (gemm_avx512.c): panels of 32 weight rows, decoded a
 * whole number of groups at a time. */
CN_INLINE int64_t cq_panel_kc(int64_t group) { return CN_MAX(group, 256 / group * group); }

CN_INLINE void cq_panels(const cq_args *a, int64_t p0, int64_t p1, cn_panel_fill fill) {
    cn_gemm_panels_bf16(a->x, a->xb, a->M, a->K, a->N, a->bias, a->y, cq_panel_kc(a->group), fill, a, p0, p1);
}

/* Specialised for the CQ presets (8-bit codes of 2- or 4-vectors, 6-bit codes
 * of 2-vectors) and the scalar heads (6- and 5-bit codes); any other layout
 * runs the generic loops. */
#define CQ_FNS(suffix, bits, d)                                                                    \
    static void cq_gemv_##suffix(const void *c, int64_t a, int64_t b) { cq_gemv_rows(c, a, b, bits, d); } \
    static void cq_gemm_##suffix(const void *c, int64_t a, int64_t b) { cq_gemm_tiles(c, a, b, bits, d); } \
    static void cq_fill_##suffix(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {      \
        cq_dequant_row(c, n, k0, k1, out, bits, d);                                                 \
    }                                                                                               \
    static void cq_panels_##suffix(const void *c, int64_t a, int64_t b) { cq_panels(c, a, b, cq_fill_##suffix); }
CQ_FNS(8x2, 8, 2)
CQ_FNS(8x4, 8, 4)
CQ_FNS(6x2, 6, 2)
CQ_FNS(4x1, 4, 1)
CQ_FNS(6x1, 6, 1)
CQ_FNS(5x1, 5, 1)

typedef struct {
    int bits, d;
    cn_range_fn gemv, gemm, panels;
} cq_variant;

static const cq_variant VARIANTS[] = {
    {8, 2, cq_gemv_8x2, cq_gemm_8x2, cq_panels_8x2},
    {8, 4, cq_gemv_8x4, cq_gemm_8x4, cq_panels_8x4},
    {6, 2, cq_gemv_6x2, cq_gemm_6x2, cq_panels_6x2},
    {4, 1, cq_gemv_4x1, cq_gemm_4x1, cq_panels_4x1},
    {6, 1, cq_gemv_6x1, cq_gemm_6x1, cq_panels_6x1},
    {5, 1, cq_gemv_5x1, cq_gemm_5x1, cq_panels_5x1},
};

/* Generic layout: bits and d at run time. */
static void cq_gemv_any(const void *c, int64_t a, int64_t b) {
    cq_gemv_rows(c, a, b, ((const cq_args *)c)->bits, ((const cq_args *)c)->d);
}
static void cq_gemm_any(const void *c, int64_t a, int64_t b) {
    cq_gemm_tiles(c, a, b, ((const cq_args *)c)->bits, ((const cq_args *)c)->d);
}
static void cq_fill_any(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    cq_dequant_row(c, n, k0, k1, out, ((const cq_args *)c)->bits, ((const cq_args *)c)->d);
}
static void cq_panels_any(const void *c, int64_t a, int64_t b) { cq_panels(c, a, b, cq_fill_any); }

/* The specialised functions of a layout, else the generic ones. */
static cq_variant cq_pick(int bits, int d) {
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++)
        if (VARIANTS[i].bits == bits && VARIANTS[i].d == d) return VARIANTS[i];
    return (cq_variant){bits, d, cq_gemv_any, cq_gemm_any, cq_panels_any};
}

/* x' = H(x * signs) per block of each row, into out. */
typedef struct {
    const float *x, *signs;
    float *out;
    int64_t K, block;
} rotate_args;

static void rotate_rows(const void *c, int64_t r0, int64_t r1) {
    const rotate_args *a = c;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = a->x + r * a->K;
        float *o = a->out + r * a->K;
        if (cn_rotate_avx512(xr, a->signs, a->K, a->block, o)) continue;
        int64_t k = 0;
        for (; k + 4 <= a->K; k += 4) vst1q_f32(o + k, vmulq_f32(vld1q_f32(xr + k), vld1q_f32(a->signs + k)));
        for (; k < a->K; k++) o[k] = xr[k] * a->signs[k];
        for (int64_t b = 0; b < a->K; b += a->block) cn_fwht_block(o + b, a->block);
    }
}

static void cq_fill_vbmi(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    const cq_args *a = c;
    cn_cq_vbmi_decode(a->planes, a->codes + n * a->stride, a->scales + n * (a->K / a->group), a->group, a->bits, a->d,
                      k0, k1, out);
}

static void cq_panels_vbmi(const void *c, int64_t p0, int64_t p1) { cq_panels(c, p0, p1, cq_fill_vbmi); }

static void cq_gemv_vbmi(const void *c, int64_t n0, int64_t n1) {
    const cq_args *a = c;
    cn_cq_vbmi_rows(a->x, a->K, a->codes, a->stride, a->bits, a->d, a->scales, a->group, a->cb, n0, n1, a->bias,
                    a->y);
}

/* ---- scalar codebooks by table lookup (arm64) --------------------------------
 * The cq6 / cq5 heads' 64 or 32 float16 entries (CQ4's 16), split into low- and
 * high-byte tables: 16 codes become 16 weights in two vqtbl lookups, two
 * zips and four float16 converts, instead of 16 scalar loads and lane
 * inserts.  Native arm64 only: SIMDe emulates vqtbl4q lane by lane, and x86
 * has cq_vbmi.c. */
#if CN_NATIVE
typedef struct {
    cq_args a;
    uint8x16x4_t lo, hi; /* byte 0 and byte 1 of each entry's float16 bits */
} cq_tbl_args;

/* Whether the layout takes the lookup, building its tables into t (entries must be exactly float16). */
static int cq_tbl_prepare(const float *cb, int bits, int d, int64_t group, cq_tbl_args *t) {
    if (d != 1 || (bits != 6 && bits != 5 && bits != 4) || group % 16) return 0;
    uint8_t lo[64] = {0}, hi[64] = {0};
    for (int i = 0; i < 1 << bits; i++) {
        const float16x4_t h = vcvt_f16_f32(vdupq_n_f32(cb[i]));
        if (vgetq_lane_f32(vcvt_f32_f16(h), 0) != cb[i]) return 0;
        const uint16_t u = vget_lane_u16(vreinterpret_u16_f16(h), 0);
        lo[i] = (uint8_t)u, hi[i] = (uint8_t)(u >> 8);
    }
    t->lo = vld1q_u8_x4(lo), t->hi = vld1q_u8_x4(hi);
    return 1;
}

CN_INLINE uint8x16_t tbl_lookup(uint8x16x4_t t, uint8x16_t idx, const int bits) {
    if (bits == 4) return vqtbl1q_u8(t.val[0], idx);
    if (bits == 5) return vqtbl2q_u8((uint8x16x2_t){{t.val[0], t.val[1]}}, idx);
    return vqtbl4q_u8(t, idx);
}

CN_INLINE void cq_tbl_rows(const cq_tbl_args *t, int64_t n0, int64_t n1, const int bits) {
    const cq_args *a = &t->a;
    const int64_t ng = a->K / a->group;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        float32x4_t tot = vdupq_n_f32(0);
        for (int64_t g = 0; g < ng; g++) {
            float32x4_t p0 = vdupq_n_f32(0), p1 = p0, p2 = p0, p3 = p0;
            for (int64_t c = g * a->group; c < (g + 1) * a->group; c += 16) {
                const uint8x16_t idx = cn_cq_codes16(row, c, 16, bits);
                const uint8x16_t l = tbl_lookup(t->lo, idx, bits), h = tbl_lookup(t->hi, idx, bits);
                const uint16x8_t w0 = vreinterpretq_u16_u8(vzip1q_u8(l, h)), w1 = vreinterpretq_u16_u8(vzip2q_u8(l, h));
                const float *x = a->x + c;
                p0 = vfmaq_f32(p0, vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(w0))), vld1q_f32(x));
                p1 = vfmaq_f32(p1, vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(w0))), vld1q_f32(x + 4));
                p2 = vfmaq_f32(p2, vcvt_f32_f16(vreinterpret_f16_u16(vget_low_u16(w1))), vld1q_f32(x + 8));
                p3 = vfmaq_f32(p3, vcvt_f32_f16(vreinterpret_f16_u16(vget_high_u16(w1))), vld1q_f32(x + 12));
            }
            tot = vfmaq_n_f32(tot, vaddq_f32(vaddq_f32(p0, p1), vaddq_f32(p2, p3)), cn_f16_scalar(sc[g]));
        }
        a->y[n] = vaddvq_f32(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

static void cq_gemv_tbl(const void *c, int64_t n0, int64_t n1) {
    const cq_tbl_args *t = c;
    if (t->a.bits == 6) cq_tbl_rows(t, n0, n1, 6);
    else if (t->a.bits == 5) cq_tbl_rows(t, n0, n1, 5);
    else cq_tbl_rows(t, n0, n1, 4);
}
#endif

/* ---- scalar codebooks on AVX2 (x86 without AVX-512 VBMI): the cq6 head, CQ4 --
 * The generic loop loads each scalar entry on its own (cq_quad), and SIMDe's
 * vqtbl4q is slower still: 94 ms per token for the Llama-3.2-1B head on a
 * Zen 3 core pair, against 19 ms for an int8 head.  The 64 float16 entries
 * split into low- and high-byte planes of four 16-byte tables each; pshufb
 * looks up 32 codes per table and three blends pick the table by the code's
 * top two bits, so 32 weights cost eight pshufb, six blends, two interleaves
 * and four float16 converts.  CQ4's 16 entries are one table per plane: two
 * pshufb and no blend; 5-bit codes' 32 are two, with one blend.  Exact: the planes hold the codebook's own bits.  The
 * same lookup fills CQ4 prefill panels (cq_fill_avx2): the generic fill took
 * ~1 ns per weight, a tenth of a Llama-3.2-1B prefill. */
#if !CN_NATIVE && defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include "avx2_common.h"

typedef struct {
    cq_args a;
    __m256i lo[4], hi[4]; /* byte 0 / byte 1 of entries 16t .. 16t+15, in both lanes */
} cq_avx2_head_args;

static int cq_avx2_head_prepare(const float *cb, int bits, int d, int64_t group, cq_avx2_head_args *t) {
    if (d != 1 || bits < 4 || bits > 6 || group % 32) return 0;
    uint8_t lo[64] = {0}, hi[64] = {0};
    for (int i = 0; i < 1 << bits; i++) {
        const uint16_t h = _cvtss_sh(cb[i], _MM_FROUND_TO_NEAREST_INT);
        if (_cvtsh_ss(h) != cb[i]) return 0;
        lo[i] = (uint8_t)h, hi[i] = (uint8_t)(h >> 8);
    }
    for (int k = 0; k < 4; k++) {
        t->lo[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(lo + 16 * k)));
        t->hi[k] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(hi + 16 * k)));
    }
    return 1;
}

/* Float16 bits of codes v .. v+31: w0 holds codes 0-7 | 16-23, w1 codes 8-15 | 24-31. */
CN_INLINE void avx2_half32(const cq_avx2_head_args *t, const uint8_t *row, int64_t v, int last, __m256i *w0,
                           __m256i *w1, const int bits) {
    __m256i lo, hi;
    if (bits == 4) {
        const __m256i idx = avx2_codes4x32(row, v);
        lo = _mm256_shuffle_epi8(t->lo[0], idx), hi = _mm256_shuffle_epi8(t->hi[0], idx);
    } else if (bits == 5) {
        const __m256i idx = avx2_codes5x32(row, v), m1 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(15));
        lo = _mm256_blendv_epi8(_mm256_shuffle_epi8(t->lo[0], idx), _mm256_shuffle_epi8(t->lo[1], idx), m1);
        hi = _mm256_blendv_epi8(_mm256_shuffle_epi8(t->hi[0], idx), _mm256_shuffle_epi8(t->hi[1], idx), m1);
    } else {
        const __m256i idx = avx2_codes6x32(row, v, last);
        const __m256i m1 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(15));
        const __m256i m2 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(31));
        const __m256i m3 = _mm256_cmpgt_epi8(idx, _mm256_set1_epi8(47));
        lo = avx2_lookup64(t->lo, idx, m1, m2, m3), hi = avx2_lookup64(t->hi, idx, m1, m2, m3);
    }
    *w0 = _mm256_unpacklo_epi8(lo, hi), *w1 = _mm256_unpackhi_epi8(lo, hi);
}

CN_INLINE void avx2_rows(const cq_avx2_head_args *t, int64_t n0, int64_t n1, const int bits) {
    const cq_args *a = &t->a;
    const int64_t ng = a->K / a->group;
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        __m256 tot = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            __m256 p0 = _mm256_setzero_ps(), p1 = p0, p2 = p0, p3 = p0;
            for (int64_t v = g * a->group; v < (g + 1) * a->group; v += 32) {
                __m256i w0, w1;
                avx2_half32(t, row, v, n == a->N - 1 && v + 32 >= a->K, &w0, &w1, bits);
                const float *x = a->x + v;
                p0 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(w0)), _mm256_loadu_ps(x), p0);
                p1 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(w1)), _mm256_loadu_ps(x + 8), p1);
                p2 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(w0, 1)), _mm256_loadu_ps(x + 16), p2);
                p3 = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(w1, 1)), _mm256_loadu_ps(x + 24), p3);
            }
            const __m256 s = _mm256_set1_ps(cn_f16_scalar(sc[g]));
            tot = _mm256_fmadd_ps(_mm256_add_ps(_mm256_add_ps(p0, p1), _mm256_add_ps(p2, p3)), s, tot);
        }
        a->y[n] = hsum8(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

static void cq_gemv_avx2_head(const void *c, int64_t n0, int64_t n1) {
    const cq_avx2_head_args *t = c;
    if (t->a.bits == 4) avx2_rows(t, n0, n1, 4);
    else if (t->a.bits == 5) avx2_rows(t, n0, n1, 5);
    else avx2_rows(t, n0, n1, 6);
}

/* Prefill panel rows: weights [k0, k1) of row n (whole groups), scaled, in natural order. */
static void cq_fill_avx2(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    const cq_avx2_head_args *t = c;
    const cq_args *a = &t->a;
    const uint8_t *row = a->codes + n * a->stride;
    const uint16_t *sc = a->scales + n * (a->K / a->group);
    for (int64_t v = k0; v < k1; v += 32) {
        __m256i w0, w1;
        if (a->bits == 4) avx2_half32(t, row, v, 0, &w0, &w1, 4);
        else if (a->bits == 5) avx2_half32(t, row, v, 0, &w0, &w1, 5);
        else avx2_half32(t, row, v, n == a->N - 1 && v + 32 >= a->K, &w0, &w1, 6);
        const __m256 s = _mm256_set1_ps(cn_f16_scalar(sc[v / a->group]));
        float *o = out + v - k0;
        _mm256_storeu_ps(o, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(w0)), s));
        _mm256_storeu_ps(o + 8, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(w1)), s));
        _mm256_storeu_ps(o + 16, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(w0, 1)), s));
        _mm256_storeu_ps(o + 24, _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(w1, 1)), s));
    }
}

static void cq_panels_avx2(const void *c, int64_t p0, int64_t p1) { cq_panels(c, p0, p1, cq_fill_avx2); }
#define CQ_AVX2_HEAD 1
#else
#define CQ_AVX2_HEAD 0
#endif

void cn_cq_rotate(const float *x, int64_t M, int64_t K, const float *signs, int64_t block, float *out) {
    rotate_args ra = {x, signs, out, K, block};
    cn_parallel_for(M, M * K * 8, rotate_rows, &ra);
}

int cn_cq_linear(const float *x, int64_t M, int64_t K, const uint8_t *codes, int64_t stride,
                 int index_bits, int vec_dim, const uint16_t *scales, int64_t group,
                 const float *codebook, const float *signs, int64_t block, int64_t N,
                 const float *bias, float *y, int bf16) {
    if (index_bits < 1 || index_bits > 16 || vec_dim < 1 || group < 1 || group % vec_dim || K % group) return -1;
    if (signs && (block < 1 || (block & (block - 1)) || K % block)) return -1;
    if (M <= 0 || N <= 0) return 0;
    /* The rotation is done once per call and shared by every weight row. */
    float *xr = NULL;
    if (signs) {
        xr = (float *)malloc(sizeof(float) * (size_t)(M * K));
        if (!xr) return -2;
        cn_cq_rotate(x, M, K, signs, block, xr);
        x = xr;
    }
    cq_args a = {x, M, K, N, codes, stride, scales, group, codebook, bias, y, index_bits, vec_dim};
    const cq_variant v = cq_pick(index_bits, vec_dim);
    cn_range_fn gemv = v.gemv, gemm = v.gemm, panels = v.panels;
    const int vbmi = cn_cq_vbmi_fits(codebook, index_bits, vec_dim, K, group);
    if (M == 1 && vbmi) {
        float *xp = (float *)malloc(sizeof(float) * (size_t)K);
        if (!xp) {
            free(xr);
            return -2;
        }
        cn_cq_vbmi_permute_x(x, K, vec_dim, xp);
        a.x = xp;
        cn_parallel_for(N, N * K, cq_gemv_vbmi, &a);
        free(xp);
    } else if (M == 1) {
#if CQ_AVX2_HEAD
        cq_avx2_head_args h = {a};
        if (cq_avx2_head_prepare(codebook, index_bits, vec_dim, group, &h)) {
            cn_parallel_for(N, N * K, cq_gemv_avx2_head, &h);
        } else
#endif
#if CN_NATIVE
        cq_tbl_args t = {a};
        if (cq_tbl_prepare(codebook, index_bits, vec_dim, group, &t)) {
            cn_parallel_for(N, N * K, cq_gemv_tbl, &t);
        } else
#endif
            cn_parallel_for(N, N * K, gemv, &a);
    } else if (cn_gemm_panels_available()) {
        if (!cn_gemm_panels_fit(cq_panel_kc(group))) {
            free(xr);
            return -2;
        }
        uint8_t planes[6][256];
        float *xp = NULL;
        if (vbmi && cq_panel_kc(group) % (64 * vec_dim) == 0 && (xp = (float *)malloc(sizeof(float) * (size_t)(M * K)))) {
            /* Weights are decoded in the VBMI kernel's order: permute x's columns to match. */
            for (int64_t m = 0; m < M; m++) cn_cq_vbmi_permute_x(x + m * K, K, vec_dim, xp + m * K);
            cn_cq_vbmi_planes(codebook, index_bits, vec_dim, planes);
            a.x = xp;
            a.planes = (const uint8_t (*)[256])planes;
            panels = cq_panels_vbmi;
        }
        uint16_t *xb = NULL;
        if (bf16 && cn_gemm_bf16_available() && K % 2 == 0 && cq_panel_kc(group) % 2 == 0 &&
            (xb = (uint16_t *)malloc(2 * (size_t)(M * K)))) {
            cn_to_bf16(a.x, M * K, xb); /* once per call; every panel meets it */
            a.xb = xb;
        }
        void *ctx = &a;
#if CQ_AVX2_HEAD
        cq_avx2_head_args h = {a}; /* scalar codebooks: panels filled by the pshufb lookup */
        if (panels != cq_panels_vbmi && cq_panel_kc(group) % 32 == 0 &&
            cq_avx2_head_prepare(codebook, index_bits, vec_dim, group, &h))
            ctx = &h, panels = cq_panels_avx2;
#endif
        cn_parallel_for((N + 31) / 32, M * N * K, panels, ctx);
        free(xp);
        free(xb);
    } else {
        cn_parallel_for((N + 3) / 4, M * N * K, gemm, &a);
    }
    free(xr);
    return 0;
}

/* Exact decode of several weights of one rotated x in one parallel region
 * (fused.c): weight i owns rows [end[i - 1], end[i]) and writes them at its
 * offset in y, with its own layout's row function. */
int cn_cq_gemv_multi(const float *x, int64_t K, int n, const cn_cq_weight *w, float *y) {
    cq_args a[CN_MULTI_MAX];
    cn_multi_range m;
    m.n = n;
    /* x in the VBMI kernel's order (one per vector size: blocks of 64 or 128 inputs),
     * made once if any weight takes it */
    float *xp[3] = {NULL, NULL, NULL};
    int64_t rows = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const int bits = w[i].index_bits, d = w[i].vec_dim;
        const int64_t group = w[i].group;
        if (bits < 1 || bits > 16 || d < 1 || group < 1 || group % d || K % group) {
            rc = -1;
            break;
        }
        a[i] = (cq_args){x, 1, K, w[i].N, w[i].codes, w[i].stride, w[i].scales, group, w[i].codebook,
                         w[i].bias, y + rows, bits, d};
        m.ctx[i] = &a[i];
        m.fn[i] = cq_pick(bits, d).gemv;
        if (cn_cq_vbmi_fits(w[i].codebook, bits, d, K, group)) { /* d is 1 or 2 */
            if (!xp[d] && (xp[d] = (float *)malloc(sizeof(float) * (size_t)K))) cn_cq_vbmi_permute_x(x, K, d, xp[d]);
            if (!xp[d]) {
                rc = -2;
                break;
            }
            a[i].x = xp[d];
            m.fn[i] = cq_gemv_vbmi;
        }
        rows += w[i].N;
        m.end[i] = rows;
    }
    if (rc == 0) cn_parallel_for(rows, rows * K, cn_multi_range_run, &m);
    free(xp[1]), free(xp[2]);
    return rc;
}

/* ---- embedding lookup --------------------------------------------------- */

/* Original-space rows: decode w' (codebook x group scale), undo the rotation
 * (H is its own inverse), then the signs: w = s * H(w'). */
typedef struct {
    cq_args a; /* codes, stride, scales, group, cb, bits, d; K = D */
    const float *signs;
    const int64_t *ids;
    int64_t block;
    float *out;
} cq_embed_args;

static void cq_embed_rows(const void *c, int64_t i0, int64_t i1) {
    const cq_embed_args *e = c;
    const cq_args *a = &e->a;
    for (int64_t i = i0; i < i1; i++) {
        float *o = e->out + i * a->K;
        const uint8_t *row = a->codes + e->ids[i] * a->stride;
        const uint16_t *sc = a->scales + e->ids[i] * (a->K / a->group);
        for (int64_t v = 0; v < a->K / a->d; v++) {
            const float s = cn_f16_scalar(sc[v * a->d / a->group]);
            const float *cv = a->cb + (int64_t)a->d * cq_code(row, v, a->bits);
            for (int k = 0; k < a->d; k++) o[v * a->d + k] = cv[k] * s;
        }
        for (int64_t b = 0; b < a->K; b += e->block) cn_fwht_block(o + b, e->block);
        for (int64_t k = 0; k < a->K; k++) o[k] *= e->signs[k];
    }
}

int cn_cq_embedding(const uint8_t *codes, int64_t stride, int index_bits, int vec_dim,
                    const uint16_t *scales, int64_t group, const float *codebook, const float *signs,
                    int64_t block, int64_t vocab, int64_t D, const int64_t *ids, int64_t n, float *out) {
    if (index_bits < 1 || index_bits > 16 || vec_dim < 1 || group < 1 || group % vec_dim || D % group ||
        block < 1 || (block & (block - 1)) || D % block)
        return -1;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= vocab) return -3;
    cq_embed_args e = {{NULL, 1, D, vocab, codes, stride, scales, group, codebook, NULL, NULL, index_bits, vec_dim},
                       signs, ids, block, out};
    cn_parallel_for(n, n * D * 8, cq_embed_rows, &e);
    return 0;
}
