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
 * between them (a few microseconds apart now), so no thread sleeps, and each
 * region is split into one contiguous stream per thread (runtime.c). */
#include <time.h>

#include "neon_common.h"

/* Bytes weight i reads: codes and scales, or its rows. */
static int64_t weight_bytes(const cn_block *b, int i) {
    static const int input[7] = {0, 0, 0, 1, 0, 0, 2}; /* K: D, Hq * d or F */
    const int64_t K = input[i] == 0 ? b->D : input[i] == 1 ? b->Hq * b->d : b->F;
    if (b->kind == 1) return b->fw[i].N * K * (b->fw[i].wtype ? 2 : 4);
    const cn_cq_weight *w = &b->cq[i];
    return w->N * w->stride + w->N * (K / w->group) * 2;
}

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

/* ---- phase timing (bench --breakdown) ------------------------------------
 * Where a block's time goes inside its one C call: wall nanoseconds and
 * weight bytes per phase, summed over calls while profiling is on (off: one
 * relaxed load per phase). */
enum { PH_QKV, PH_ROPE, PH_ATTN, PH_O, PH_GATE_UP, PH_DOWN, PHASES };
static int profiling;
static int64_t phase_ns[PHASES], phase_bytes[PHASES], profiled_calls;

void cn_block_profile(int on) {
    if (on) {
        for (int i = 0; i < PHASES; i++) {
            __atomic_store_n(&phase_ns[i], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&phase_bytes[i], 0, __ATOMIC_RELAXED);
        }
        __atomic_store_n(&profiled_calls, 0, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&profiling, on != 0, __ATOMIC_RELAXED);
}

int64_t cn_block_profile_read(int64_t *ns, int64_t *bytes) {
    for (int i = 0; i < PHASES; i++) {
        ns[i] = __atomic_load_n(&phase_ns[i], __ATOMIC_RELAXED);
        bytes[i] = __atomic_load_n(&phase_bytes[i], __ATOMIC_RELAXED);
    }
    return __atomic_load_n(&profiled_calls, __ATOMIC_RELAXED);
}

static int64_t clock_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Ends phase ph (started at *t0) and starts the next one. */
static void phase_end(const cn_block *b, int ph, int64_t *t0) {
    if (!__atomic_load_n(&profiling, __ATOMIC_RELAXED)) return;
    static const int first[PHASES] = {0, 0, 0, 3, 4, 6}, count[PHASES] = {3, 0, 0, 1, 2, 1};
    const int64_t t = clock_ns();
    if (*t0 == 0) { /* turned on during this call: time from the next phase */
        *t0 = t;
        return;
    }
    int64_t bytes = 0;
    for (int i = first[ph]; i < first[ph] + count[ph]; i++) bytes += weight_bytes(b, i);
    __atomic_fetch_add(&phase_ns[ph], t - *t0, __ATOMIC_RELAXED);
    __atomic_fetch_add(&phase_bytes[ph], bytes, __ATOMIC_RELAXED);
    if (ph == PH_DOWN) __atomic_fetch_add(&profiled_calls, 1, __ATOMIC_RELAXED);
    *t0 = t;
}

int cn_decoder_block(const cn_block *b, const float *x, float *out, void *cache_k, void *cache_v, int kvtype,
                     int64_t max_len, int64_t offset) {
    if (bad_shapes(b) || (kvtype != 0 && kvtype != 1) || offset < 0 || offset >= max_len) return -1;
    const int64_t D = b->D, F = b->F, qd = b->Hq * b->d, kd = b->Hkv * b->d;
    /* q k v | roped q | roped k | attention | o_proj or down | gate*up */
    float *buf = (float *)malloc(sizeof(float) * (size_t)(qd + 2 * kd + qd + kd + qd + D + F));
    if (!buf) return -2;
    float *qkv = buf, *qr = qkv + qd + 2 * kd, *kr = qr + qd, *att = kr + kd, *proj = att + qd, *g = proj + D;
    int64_t t0 = __atomic_load_n(&profiling, __ATOMIC_RELAXED) ? clock_ns() : 0;
    int rc = group(b, 0, 3, x, D, b->attn_norm, qkv, -1);
    phase_end(b, PH_QKV, &t0);
    const double pos = (double)offset;
    if (rc == 0)
        rc = cn_rope_qk(qkv, qkv + qd, qr, kr, b->Hq, b->Hkv, 1, b->d, &pos, b->inv_freq, b->half, b->q_norm,
                        b->k_norm, b->eps, 0);
    phase_end(b, PH_ROPE, &t0);
    if (rc == 0) /* a first token into an empty float16 cache attends over its own unrounded K/V */
        rc = cn_cached_attention(qr, kr, qkv + qd + kd, cache_k, cache_v, kvtype, att, 1, b->Hq, b->Hkv, 1, b->d,
                                 max_len, offset, b->scale, b->window, 0.0f, offset == 0 && kvtype != 0);
    phase_end(b, PH_ATTN, &t0);
    if (rc == 0) rc = project(b, 3, att, qd, proj);
    if (rc == 0)
        for (int64_t i = 0; i < D; i++) out[i] = x[i] + proj[i];
    phase_end(b, PH_O, &t0);
    if (rc == 0) rc = group(b, 4, 2, out, D, b->mlp_norm, g, b->act);
    phase_end(b, PH_GATE_UP, &t0);
    if (rc == 0) rc = project(b, 6, g, F, proj);
    if (rc == 0)
        for (int64_t i = 0; i < D; i++) out[i] += proj[i];
    phase_end(b, PH_DOWN, &t0);
    free(buf);
    return rc;
}

int cn_decoder_stack(const cn_block *const *b, int n, const float *x, float *out, void *const *cache_k,
                     void *const *cache_v, int kvtype, int64_t max_len, int64_t offset) {
    if (n <= 0 || !b || !cache_k || !cache_v) return -1;
    for (int i = 0; i < n; i++)
        if (!b[i] || b[i]->D != b[0]->D || !cache_k[i] || !cache_v[i]) return -1;
    /* A block reads x only before it writes out (q/k/v, then the first residual add),
     * so every layer can run in place on out. */
    if (out != x) memcpy(out, x, sizeof(float) * (size_t)b[0]->D);
    for (int i = 0; i < n; i++) {
        const int rc = cn_decoder_block(b[i], out, out, cache_k[i], cache_v[i], kvtype, max_len, offset);
        if (rc != 0) return rc;
    }
    return 0;
}
