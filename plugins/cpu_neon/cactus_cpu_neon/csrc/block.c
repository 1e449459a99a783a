/* One whole decoder block (Llama, Mistral, Qwen3) for one decoded token, in
 * one call from Python.
 *
 * The fused ops cut a block to six Python op calls, but each still costs
 * microseconds of dispatch, checks, allocation and cffi conversions, and runs
 * with the caches cold after the previous kernel streamed megabytes of
 * weights: measured at ~2.7 ms of a 16 ms Qwen3-0.6B token (docs/cpu_neon.md),
 * time in which the memory bus, the real bound of decode, sits idle.  Here the
 * block's kernels run back to back: the same entry points, with the same
 * arguments, in the same order as the op-by-op path, so the result is the
 * same bit for bit:
 *
 *   q, k, v = multi_linear(rms_norm(x))          cn_cq_linear_multi / cn_linear_multi
 *   q, k    = rope(qk_norm(q), qk_norm(k))       cn_rope_qk
 *   a       = attention(q, cache + [k], + [v])   cn_cached_attention
 *   h       = x + o_proj(a)                      cn_cq_linear(_i8) / cn_linear
 *   g       = act(gate(rms_norm(h))) * up(...)   cn_cq_linear_multi / cn_linear_multi
 *   out     = h + down(g)                        cn_cq_linear(_i8) / cn_linear
 *
 * Each kernel still runs its own parallel region; the pool's workers spin
 * between them (a few microseconds apart now), so no thread sleeps. */
#include "neon_common.h"

/* One projection of one row, as the backend's linear runs it for that weight. */
static int project(const cn_block *b, int i, const float *x, int64_t K, float *y) {
    if (b->kind == 1) {
        const cn_float_weight *w = &b->fw[i];
        cn_linear(x, 1, K, w->w, w->wtype, w->N, w->bias, y);
        return 0;
    }
    const cn_cq_weight *w = &b->cq[i];
    if (w->cb_q8) /* int8-activation decode, as for any one-token call of a weight that has it */
        return cn_cq_linear_i8(x, 1, K, w->codes, w->stride, w->index_bits, w->vec_dim, w->scales, w->group, w->cb_q8,
                               w->cb_scale, w->signs, w->block, w->N, w->bias, y);
    return cn_cq_linear(x, 1, K, w->codes, w->stride, w->index_bits, w->vec_dim, w->scales, w->group, w->codebook,
                        w->signs, w->block, w->N, w->bias, y, b->bf16);
}

/* Weights first..first+n-1 on one x, normed by norm_w first; gated >= 0 applies act(out0) * out1. */
static int group(const cn_block *b, int first, int n, const float *x, int64_t K, const float *norm_w, float *y,
                 int gated) {
    if (b->kind == 1)
        return cn_linear_multi(x, 1, K, n, b->fw + first, y, norm_w, b->eps, 0, gated);
    return cn_cq_linear_multi(x, 1, K, n, b->cq + first, y, norm_w, b->eps, 0, b->bf16, 1, gated);
}

/* The shapes the weights must have for this block; 0 when they do. */
static int bad_shapes(const cn_block *b) {
    const int64_t qd = b->Hq * b->d, kd = b->Hkv * b->d;
    const int64_t want[7] = {qd, kd, kd, b->D, b->F, b->F, b->D};
    if (b->kind != 0 && b->kind != 1) return 1;
    if (b->D <= 0 || b->F <= 0 || b->d <= 0 || b->Hkv <= 0 || b->Hq % b->Hkv || 2 * b->half > b->d) return 1;
    if (!b->attn_norm || !b->mlp_norm || (b->half > 0 && !b->inv_freq) || b->act < 0 || b->act > 3) return 1;
    for (int i = 0; i < 7; i++)
        if ((b->kind ? b->fw[i].N : b->cq[i].N) != want[i]) return 1;
    return 0;
}

int cn_decoder_block(const cn_block *b, const float *x, float *out, void *cache_k, void *cache_v, int kvtype,
                     int64_t max_len, int64_t offset) {
    if (bad_shapes(b) || (kvtype != 0 && kvtype != 1) || offset < 0 || offset >= max_len) return -1;
    const int64_t D = b->D, F = b->F, qd = b->Hq * b->d, kd = b->Hkv * b->d;
    /* q k v | roped q | roped k | attention | o_proj or down | gate*up */
    float *buf = (float *)malloc(sizeof(float) * (size_t)(qd + 2 * kd + qd + kd + qd + D + F));
    if (!buf) return -2;
    float *qkv = buf, *qr = qkv + qd + 2 * kd, *kr = qr + qd, *att = kr + kd, *proj = att + qd, *g = proj + D;
    int rc = group(b, 0, 3, x, D, b->attn_norm, qkv, -1);
    const double pos = (double)offset;
    if (rc == 0)
        rc = cn_rope_qk(qkv, qkv + qd, qr, kr, b->Hq, b->Hkv, 1, b->d, &pos, b->inv_freq, b->half, b->q_norm,
                        b->k_norm, b->eps, 0);
    if (rc == 0) /* a first token into an empty float16 cache attends over its own unrounded K/V */
        rc = cn_cached_attention(qr, kr, qkv + qd + kd, cache_k, cache_v, kvtype, att, 1, b->Hq, b->Hkv, 1, b->d,
                                 max_len, offset, b->scale, b->window, 0.0f, offset == 0 && kvtype != 0);
    if (rc == 0) rc = project(b, 3, att, qd, proj);
    if (rc == 0) {
        for (int64_t i = 0; i < D; i++) out[i] = x[i] + proj[i];
        rc = group(b, 4, 2, out, D, b->mlp_norm, g, b->act);
    }
    if (rc == 0) rc = project(b, 6, g, F, proj);
    if (rc == 0)
        for (int64_t i = 0; i < D; i++) out[i] += proj[i];
    free(buf);
    return rc;
}
