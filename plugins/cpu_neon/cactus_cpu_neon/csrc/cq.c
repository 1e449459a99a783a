/* linear on CQ weights (cactus_core.formats.CQTensor, docs/formats.md).
 *
 * A CQ row is a stream of index_bits-bit codes, each naming a vec_dim-vector
 * of the codebook, with one float16 scale per group_size inputs; the matrix
 * lives in a rotated domain, so the caller passes x already rotated
 * (x' = H(x * signs), done once per call and shared by every row).
 *
 * Decode (M == 1) fuses the lookup into the dot product: the codebook is
 * tiny (256 x 2 floats = 2 KiB) and stays in L1, so each code costs a byte
 * load and a 64- or 128-bit table load feeding an FMA, and the only memory
 * traffic is the codes themselves: ~4.1 bits per weight for CQ4.
 * Prefill (M > 1) dequantizes four rows at a time into a per-thread float32
 * panel and runs the float GEMM microkernel over it. */
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
    int bits, d; /* read only by the generic (unspecialised) variant */
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
 * read yields all four when v is a multiple of 4 (every group start is). */
CN_INLINE void cq_codes4(const uint8_t *row, int64_t v, const int bits, uint32_t c[4]) {
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
    for (int64_t n = n0; n < n1; n++)
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

/* Specialised for the CQ presets (8-bit codes of 2- or 4-vectors, 6-bit codes
 * of 2-vectors); any other layout runs the generic loops. */
#define CQ_FNS(suffix, bits, d)                                                                    \
    static void cq_gemv_##suffix(const void *c, int64_t a, int64_t b) { cq_gemv_rows(c, a, b, bits, d); } \
    static void cq_gemm_##suffix(const void *c, int64_t a, int64_t b) { cq_gemm_tiles(c, a, b, bits, d); }
CQ_FNS(8x2, 8, 2)
CQ_FNS(8x4, 8, 4)
CQ_FNS(6x2, 6, 2)
CQ_FNS(4x1, 4, 1)

typedef struct {
    int bits, d;
    cn_range_fn gemv, gemm;
} cq_variant;

static const cq_variant VARIANTS[] = {
    {8, 2, cq_gemv_8x2, cq_gemm_8x2},
    {8, 4, cq_gemv_8x4, cq_gemm_8x4},
    {6, 2, cq_gemv_6x2, cq_gemm_6x2},
    {4, 1, cq_gemv_4x1, cq_gemm_4x1},
};

/* Generic layout: bits and d at run time. */
static void cq_gemv_any(const void *c, int64_t a, int64_t b) {
    cq_gemv_rows(c, a, b, ((const cq_args *)c)->bits, ((const cq_args *)c)->d);
}
static void cq_gemm_any(const void *c, int64_t a, int64_t b) {
    cq_gemm_tiles(c, a, b, ((const cq_args *)c)->bits, ((const cq_args *)c)->d);
}

int cn_cq_linear(const float *x, int64_t M, int64_t K, const uint8_t *codes, int64_t stride,
                 int index_bits, int vec_dim, const uint16_t *scales, int64_t group,
                 const float *codebook, int64_t N, const float *bias, float *y) {
    if (index_bits < 1 || index_bits > 16 || vec_dim < 1 || group % vec_dim || K % group) return -1;
    if (M <= 0 || N <= 0) return 0;
    cq_args a = {x, M, K, N, codes, stride, scales, group, codebook, bias, y, index_bits, vec_dim};
    cn_range_fn gemv = NULL, gemm = NULL;
    for (size_t i = 0; i < sizeof VARIANTS / sizeof VARIANTS[0]; i++)
        if (VARIANTS[i].bits == index_bits && VARIANTS[i].d == vec_dim) {
            gemv = VARIANTS[i].gemv;
            gemm = VARIANTS[i].gemm;
        }
    if (!gemv) {
        gemv = cq_gemv_any;
        gemm = cq_gemm_any;
    }
    if (M == 1) cn_parallel_for(N, N * K, gemv, &a);
    else cn_parallel_for((N + 3) / 4, M * N * K, gemm, &a);
    return 0;
}
