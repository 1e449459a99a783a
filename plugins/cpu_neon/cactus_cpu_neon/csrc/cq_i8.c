/* CQ decode (8- and 6-bit codes of 2- and 4-vectors: CQ4, CQ3, CQ2; 6- and
 * 5-bit codes of scalars: the cq6 / cq5 output heads) with int8 activations
 * and integer dot products.
 *
 * The exact decode (cq.c, cq_vbmi.c) builds float32 weights from the
 * codebook and multiplies them with float FMAs: on the 2-core EPYC that is
 * compute-bound at ~7 GB/s of codes per core.  Here the rotated x is
 * quantized to int8 once per call, one scale per scale group (the weights'
 * group: one float multiply per group and row, and the Hadamard rotation has
 * already spread any outlier), and the codebook is quantized to int8 once
 * per tensor (by the backend).  Then a code costs a byte table lookup per
 * component and a quarter of a 4-way int8 dot product; each group's int32
 * sum is scaled by weight scale x (x scale x codebook scale) in float.
 *
 * Two kernels: AVX-512 VBMI + VNNI (vpermi2b lookups, vpdpbusd dots) in
 * cq_vbmi.c, and this file's NEON one (vqtbl4q lookups, vdotq_s32 where the
 * CPU has the dot-product extension, else widening multiplies).  Both read x
 * in the layout of cn_cq_i8_args: per group, chunks of 64 codes with each
 * component's values contiguous, so a component's looked-up weights meet
 * their x without any interleaving.
 *
 * Accuracy: two int8 roundings (x per group, codebook per tensor) cost about
 * 1e-2 of a row's magnitude, the kind of trade llama.cpp's 8-bit activations
 * make; tests/cpu_neon/test_int8_activations.py measures it and checks that
 * the default model decodes the same greedy tokens. */
#include "neon_common.h"

/* Four codes' int8 values of one component to o[0..3]. */
CN_INLINE int32x4_t put4(float32x4_t v, float inv, int8_t *o) {
    const int32x4_t q = vcvtnq_s32_f32(vmulq_n_f32(v, inv));
    const int16x4_t h = vqmovn_s32(q);
    vst1_lane_s32((int32_t *)(void *)o, vreinterpret_s32_s8(vqmovn_s16(vcombine_s16(h, h))), 0);
    return q;
}

/* Row m of the rotated x into xq / xf / xsum (see cn_cq_i8_args). */
static void quantize_x(const float *x, int64_t K, int64_t group, const int d, float cb_scale, int8_t *xq,
                       float *xf, int32_t *xsum) {
    if (cn_cq_quantize_x_avx512(x, K, group, d, cb_scale, xq, xf, xsum)) return;
    const int64_t C = group / d, nch = (C + 63) / 64;
    for (int64_t g = 0; g < K / group; g++) {
        const float *xg = x + g * group;
        float32x4_t m = vdupq_n_f32(0);
        int64_t i = 0;
        for (; i + 4 <= group; i += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(xg + i)));
        float amax = vmaxvq_f32(m);
        for (; i < group; i++) amax = CN_MAX(amax, fabsf(xg[i]));
        const float inv = amax > 0 ? 127.0f / amax : 0.0f;
        xf[g] = amax / 127.0f * cb_scale;
        int8_t *dst = xq + g * nch * 64 * d;
        memset(dst, 0, (size_t)(nch * 64 * d));
        int32x4_t sum = vdupq_n_s32(0);
        for (int64_t c = 0; c < C; c += 4) { /* C % 4 == 0: groups are whole 4-vector runs */
            int8_t *o = dst + (c / 64) * 64 * d + c % 64; /* component e at o + 64 e */
            if (d == 1) {
                sum = vaddq_s32(sum, put4(vld1q_f32(xg + c), inv, o));
            } else if (d == 2) {
                const float32x4x2_t v = vld2q_f32(xg + 2 * c); /* components of codes c..c+3 */
                for (int e = 0; e < 2; e++) sum = vaddq_s32(sum, put4(v.val[e], inv, o + 64 * e));
            } else {
                const float32x4x4_t v = vld4q_f32(xg + 4 * c);
                for (int e = 0; e < 4; e++) sum = vaddq_s32(sum, put4(v.val[e], inv, o + 64 * e));
            }
        }
        xsum[g] = vaddvq_s32(sum);
    }
}

/* ---- the NEON kernel ------------------------------------------------------ */

/* Table lookup of 16 codes in one component's int8 codebook: four 64-byte
 * tables for 256 entries (vqtbx leaves lanes whose index is out of range),
 * one for 64, half of one for 32. */
CN_INLINE int8x16_t lookup16(const int8x16x4_t *t, uint8x16_t idx, const int bits) {
    if (bits == 5) {
        const int8x16x2_t t2 = {{t[0].val[0], t[0].val[1]}};
        return vqtbl2q_s8(t2, idx);
    }
    int8x16_t r = vqtbl4q_s8(t[0], idx);
    if (bits == 8) {
        r = vqtbx4q_s8(r, t[1], vsubq_u8(idx, vdupq_n_u8(64)));
        r = vqtbx4q_s8(r, t[2], vsubq_u8(idx, vdupq_n_u8(128)));
        r = vqtbx4q_s8(r, t[3], vsubq_u8(idx, vdupq_n_u8(192)));
    }
    return r;
}

CN_INLINE int32x4_t dot16(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(acc, a, b);
#else
    /* |a|, |b| <= 127: a pair of products fits int16 */
    return vpadalq_s16(acc, vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b));
#endif
}

CN_INLINE void i8_rows_neon(const cn_cq_i8_args *a, int64_t n0, int64_t n1, const int bits, const int d) {
    int8x16x4_t t[4][4];
    for (int e = 0; e < d; e++)
        for (int q = 0; q < (bits == 8 ? 4 : 1); q++) {
            const int8_t *p = a->cbq + (e << bits) + 64 * q;
            if (bits == 4) { /* 16 entries */
                t[e][q].val[0] = vld1q_s8(p);
                t[e][q].val[1] = t[e][q].val[2] = t[e][q].val[3] = vdupq_n_s8(0);
            } else if (bits == 5) { /* 32 entries: never read past the plane */
                t[e][q].val[0] = vld1q_s8(p), t[e][q].val[1] = vld1q_s8(p + 16);
                t[e][q].val[2] = t[e][q].val[3] = vdupq_n_s8(0);
            } else {
                t[e][q] = vld1q_s8_x4(p);
            }
        }
    /* 4-bit scalar codes step by 16 bytes (32 codes): the low nibbles are the even inputs,
     * at xq, the high nibbles the odd ones, at xq + 64 (x's layout: cn_cq_i8_xdim). */
    const int xd = cn_cq_i8_xdim(bits, d);
    const int64_t ng = a->K / a->group, C = bits == 4 ? a->group / 2 : a->group / d; /* steps of 16 */
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *row = a->codes + n * a->stride;
        const uint16_t *sc = a->scales + n * ng;
        float32x4_t tot = vdupq_n_f32(0);
        for (int64_t g = 0; g < ng; g++) {
            int32x4_t acc = vdupq_n_s32(0);
            for (int64_t c = 0; c < C; c += 16) {
                const int8_t *xq = a->xq + (g * a->nch + c / 64) * 64 * xd + c % 64;
                if (bits == 4) {
                    uint8_t buf[16] = {0}; /* a short last step never reads past the group */
                    const uint8_t *p = row + g * C + c;
                    if (C - c < 16) memcpy(buf, p, (size_t)(C - c)), p = buf;
                    const uint8x16_t b = vld1q_u8(p);
                    acc = dot16(acc, vqtbl1q_s8(t[0][0].val[0], vandq_u8(b, vdupq_n_u8(15))), vld1q_s8(xq));
                    acc = dot16(acc, vqtbl1q_s8(t[0][0].val[0], vshrq_n_u8(b, 4)), vld1q_s8(xq + 64));
                    continue;
                }
                const uint8x16_t idx = cn_cq_codes16(row, g * C + c, CN_MIN(16, C - c), bits);
                for (int e = 0; e < d; e++) acc = dot16(acc, lookup16(t[e], idx, bits), vld1q_s8(xq + 64 * e));
            }
            tot = vfmaq_n_f32(tot, vcvtq_f32_s32(acc), cn_f16_scalar(sc[g]) * a->xf[g]);
        }
        a->y[n] = vaddvq_f32(tot) + (a->bias ? a->bias[n] : 0.0f);
    }
}

static void i8_rows(const void *c, int64_t n0, int64_t n1) {
    const cn_cq_i8_args *a = c;
    if (cn_cq_i8_avx512_usable(a->bits, a->d)) cn_cq_i8_avx512_rows(a, n0, n1);
    else if (cn_cq_i8_avx2_usable(a->bits, a->d)) cn_cq_i8_avx2_rows(a, n0, n1);
    else if (a->bits == 4) i8_rows_neon(a, n0, n1, 4, 1);
    else if (a->d == 1) a->bits == 6 ? i8_rows_neon(a, n0, n1, 6, 1) : i8_rows_neon(a, n0, n1, 5, 1);
    else if (a->d == 2) a->bits == 8 ? i8_rows_neon(a, n0, n1, 8, 2) : i8_rows_neon(a, n0, n1, 6, 2);
    else a->bits == 8 ? i8_rows_neon(a, n0, n1, 8, 4) : i8_rows_neon(a, n0, n1, 6, 4);
}

int cn_cq_i8_cb_limit(int index_bits, int vec_dim) { return index_bits == 4 && vec_dim == 1 ? 63 : 127; }

int cn_cq_i8_kernel(int index_bits, int vec_dim) {
    if (!cn_cq_i8_codes(index_bits, vec_dim)) return 0;
    if (cn_cq_i8_avx512_usable(index_bits, vec_dim)) return 2; /* measured: docs/cpu_neon.md */
    if (cn_cq_i8_avx2_usable(index_bits, vec_dim)) return 2;
    /* Native NEON: tested under qemu, speed on arm64 hardware not measured yet.
     * Through SIMDe the table lookups are emulated lane by lane (70x slower
     * than the exact kernel on SSE2): none. */
    return CN_NATIVE ? 1 : 0;
}

int cn_cq_linear_i8(const float *x, int64_t M, int64_t K, const uint8_t *codes, int64_t stride, int index_bits,
                    int vec_dim, const uint16_t *scales, int64_t group, const int8_t *cb_q8, float cb_scale,
                    const float *signs, int64_t block, int64_t N, const float *bias, float *y) {
    if (!cn_cq_i8_layout(index_bits, vec_dim, group, K)) return -1; /* whole 4-code runs */
    if (signs && (block < 1 || (block & (block - 1)) || K % block)) return -1;
    if (M <= 0 || N <= 0) return 0;
    const int xd = cn_cq_i8_xdim(index_bits, vec_dim);
    const int64_t ng = K / group, nch = (group / xd + 63) / 64;
    float *xr = (float *)malloc(sizeof(float) * (size_t)(signs ? M * K : 0) + sizeof(float) * (size_t)ng);
    int8_t *xq = (int8_t *)malloc((size_t)(ng * nch * 64 * xd));
    int32_t *xsum = (int32_t *)malloc(sizeof(int32_t) * (size_t)ng);
    if (!xr || !xq || !xsum) {
        free(xr), free(xq), free(xsum);
        return -2;
    }
    float *xf = xr + (signs ? M * K : 0);
    if (signs) { /* once per call, shared by every weight row */
        cn_cq_rotate(x, M, K, signs, block, xr);
        x = xr;
    }
    cn_cq_i8_args a = {xq, xf, xsum, codes, stride, scales, K, group, nch, index_bits, vec_dim, cb_q8, bias, NULL};
    for (int64_t m = 0; m < M; m++) {
        quantize_x(x + m * K, K, group, xd, cb_scale, xq, xf, xsum);
        a.y = y + m * N;
        cn_parallel_for(N, N * K, i8_rows, &a);
    }
    free(xr), free(xq), free(xsum);
    return 0;
}

/* ---- several weights of one x in one parallel region (fused.c) ----------- */

int cn_cq_i8_multi(const float *x, int64_t K, int n, const cn_cq_weight *w, float *y) {
    /* Per weight: rotated x (K), int8 x, base scales (cb_scale 1), its own scales, sums. */
    size_t bytes = 0;
    for (int i = 0; i < n; i++) {
        const int bits = w[i].index_bits, d = cn_cq_i8_xdim(bits, w[i].vec_dim);
        const int64_t group = w[i].group;
        if (!cn_cq_i8_layout(bits, w[i].vec_dim, group, K)) return -1;
        const size_t ng = (size_t)(K / group);
        bytes += ng * (size_t)((group / d + 63) / 64 * 64 * d) + 16 * ng + 4 * (size_t)K;
    }
    char *buf = (char *)malloc(bytes + 64 * (size_t)n);
    if (!buf) return -2;
    cn_cq_i8_args a[CN_MULTI_MAX];
    cn_multi_range m;
    m.n = n;
    float *xf_base[CN_MULTI_MAX];
    char *p = buf;
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        const int d = cn_cq_i8_xdim(w[i].index_bits, w[i].vec_dim); /* x's layout */
        const int64_t group = w[i].group, ng = K / group, nch = (group / d + 63) / 64;
        int8_t *xq = (int8_t *)(p + (64 - (uintptr_t)p % 64) % 64); /* a cache line apart */
        float *xr = (float *)(void *)(xq + ng * nch * 64 * d), *xf = xr + K;
        xf_base[i] = xf + ng;
        int32_t *xsum = (int32_t *)(void *)(xf_base[i] + ng);
        p = (char *)(xsum + ng);
        /* An earlier weight with the same rotation and grouping already quantized x. */
        int j = 0;
        while (j < i && !(w[j].signs == w[i].signs && (!w[i].signs || w[j].block == w[i].block) &&
                          w[j].group == group && cn_cq_i8_xdim(w[j].index_bits, w[j].vec_dim) == d))
            j++;
        if (j < i) {
            a[i] = a[j];
            xf_base[i] = xf_base[j];
        } else {
            const float *xi = x;
            if (w[i].signs) {
                cn_cq_rotate(x, 1, K, w[i].signs, w[i].block, xr);
                xi = xr;
            }
            quantize_x(xi, K, group, d, 1.0f, xq, xf_base[i], xsum);
            a[i] = (cn_cq_i8_args){xq, NULL, xsum, NULL, 0, NULL, K, group, nch, 0, 0, NULL, NULL, NULL};
        }
        for (int64_t g = 0; g < ng; g++) xf[g] = xf_base[i][g] * w[i].cb_scale;
        a[i].xf = xf;
        a[i].codes = w[i].codes, a[i].stride = w[i].stride, a[i].scales = w[i].scales;
        a[i].bits = w[i].index_bits, a[i].d = w[i].vec_dim, a[i].cbq = w[i].cb_q8, a[i].bias = w[i].bias;
        a[i].y = y + rows;
        m.fn[i] = i8_rows, m.ctx[i] = &a[i];
        rows += w[i].N;
        m.end[i] = rows;
    }
    cn_parallel_for(rows, rows * K, cn_multi_range_run, &m);
    free(buf);
    return 0;
}
