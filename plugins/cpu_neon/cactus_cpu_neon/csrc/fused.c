/* Fused projections: the weights that read one input (q/k/v, gate/up) in one
 * call from Python, CQ or float32 / float16 / bfloat16.
 *
 * Decode calls a few hundred ops per token, and each costs microseconds of
 * Python (dispatch, checks, allocation, the cffi call) beside its kernel;
 * docs/cpu_neon.md measures it at a sixth of a step.  One call per group also
 * rotates x once for the group (CQ tensors quantized with one seed share
 * their sign vector, so the backend hands them one sign array) and, on the
 * int8 decode path, quantizes it once and runs every row of every weight in
 * one parallel region instead of one region (and one wait) per weight; the
 * exact CQ decode does the same when the weights share one rotation, and so
 * does the float decode. */
#include "neon_common.h"

static int pow2_dividing(int64_t block, int64_t K) { return block >= 1 && !(block & (block - 1)) && K % block == 0; }

/* x RMS-normalised into *buf (the caller frees it) when norm_w is given, else x
 * itself; NULL when out of memory. */
static const float *prenorm(const float *x, int64_t M, int64_t K, const float *norm_w, float eps, int unit_offset,
                            float **buf) {
    *buf = NULL;
    if (!norm_w) return x;
    if (!(*buf = (float *)malloc(sizeof(float) * (size_t)(M * K)))) return NULL;
    cn_rms_norm(x, norm_w, *buf, M, K, eps, unit_offset);
    return *buf;
}

int cn_cq_linear_multi(const float *x, int64_t M, int64_t K, int n, const cn_cq_weight *w, float *y,
                       const float *norm_w, float eps, int unit_offset, int bf16, int i8, int gated) {
    if (n < 1 || n > CN_MULTI_MAX || K <= 0) return -1;
    if (gated > 3 || (gated >= 0 && (n != 2 || w[0].N != w[1].N))) return -1; /* kinds: cn_activation */
    int64_t total = 0;
    int all_i8 = M == 1 && i8;
    for (int i = 0; i < n; i++) {
        if (w[i].N < 0 || (w[i].signs && !pow2_dividing(w[i].block, K))) return -1;
        total += w[i].N;
        all_i8 = all_i8 && w[i].cb_q8 != NULL;
    }
    if (M <= 0 || total == 0) return 0;
    float *out = y, *scratch = NULL, *xr = NULL, *xn;
    if (!(x = prenorm(x, M, K, norm_w, eps, unit_offset, &xn))) return -2;
    if (gated >= 0 && !(out = scratch = (float *)malloc(sizeof(float) * (size_t)(M * total)))) {
        free(xn);
        return -2;
    }
    int rc = 0;
    int one_rotation = 1; /* every weight rotates x the same way (one quantization seed) */
    for (int i = 1; i < n; i++)
        one_rotation = one_rotation && w[i].signs == w[0].signs && (!w[0].signs || w[i].block == w[0].block);
    if (all_i8) {
        rc = cn_cq_i8_multi(x, K, n, w, out);
    } else if (M == 1 && one_rotation) {
        const float *xi = x;
        if (w[0].signs) {
            if (!(xr = (float *)malloc(sizeof(float) * (size_t)K))) rc = -2;
            else cn_cq_rotate(x, 1, K, w[0].signs, w[0].block, xr);
            xi = xr;
        }
        if (rc == 0) rc = cn_cq_gemv_multi(xi, K, n, w, out);
    } else {
        const cn_cq_weight *rotated = NULL; /* the weight whose rotation xr holds */
        float *o = out;
        for (int i = 0; i < n && rc == 0; o += M * w[i].N, i++) {
            const float *xi = x;
            if (w[i].signs) {
                if (!xr && !(xr = (float *)malloc(sizeof(float) * (size_t)(M * K)))) {
                    rc = -2;
                    break;
                }
                if (!rotated || rotated->signs != w[i].signs || rotated->block != w[i].block) {
                    cn_cq_rotate(x, M, K, w[i].signs, w[i].block, xr);
                    rotated = &w[i];
                }
                xi = xr;
            }
            rc = cn_cq_linear(xi, M, K, w[i].codes, w[i].stride, w[i].index_bits, w[i].vec_dim, w[i].scales,
                              w[i].group, w[i].codebook, NULL, 0, w[i].N, w[i].bias, o, bf16);
        }
    }
    if (rc == 0 && gated >= 0) cn_gated_activation(out, out + M * w[0].N, y, M * w[0].N, gated);
    free(scratch);
    free(xr);
    free(xn);
    return rc;
}

int cn_linear_multi(const float *x, int64_t M, int64_t K, int n, const cn_float_weight *w, float *y,
                    const float *norm_w, float eps, int unit_offset, int gated) {
    if (n < 1 || n > CN_MULTI_MAX || K <= 0) return -1;
    if (gated > 3 || (gated >= 0 && (n != 2 || w[0].N != w[1].N))) return -1;
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (w[i].N < 0 || w[i].wtype < 0 || w[i].wtype > 2) return -1;
        total += w[i].N;
    }
    if (M <= 0 || total == 0) return 0;
    float *out = y, *scratch = NULL, *xn;
    if (!(x = prenorm(x, M, K, norm_w, eps, unit_offset, &xn))) return -2;
    if (gated >= 0 && !(out = scratch = (float *)malloc(sizeof(float) * (size_t)(M * total)))) {
        free(xn);
        return -2;
    }
    if (M == 1) {
        cn_linear_gemv_multi(x, K, n, w, out);
    } else {
        float *o = out;
        for (int i = 0; i < n; o += M * w[i].N, i++) cn_linear(x, M, K, w[i].w, w[i].wtype, w[i].N, w[i].bias, o);
    }
    if (gated >= 0) cn_gated_activation(out, out + M * w[0].N, y, M * w[0].N, gated);
    free(scratch);
    free(xn);
    return 0;
}
