/* Scaled dot-product attention with grouped-query heads.
 *
 * One task per (batch, KV head, query position): scores against the keys
 * it may see (the causal and sliding-window limits become a [lo, hi) key
 * range, so hidden keys cost nothing), optional softcap and additive mask,
 * an exact two-pass softmax in a per-thread scratch row, then the weighted
 * sum of values.  Keys and values are float32 or float16 (a half-size KV
 * cache), read in place and widened in registers like 16-bit weights.
 * Prefill on AVX-512 builds goes through the panel GEMM instead (below). */
#include "neon_common.h"

#define VB 64 /* value rows per block: 64 x 256 floats at most, 64 KiB */

/* q . k for one key row k of type kt. */
CN_INLINE float dot(const float *q, const void *k, int64_t d, const int kt) {
    float32x4_t s0 = vdupq_n_f32(0), s1 = s0;
    int64_t i = 0;
    for (; i + 8 <= d; i += 8) {
        float32x4_t lo, hi;
        cn_load_w8(k, i, kt, &lo, &hi);
        s0 = vfmaq_f32(s0, vld1q_f32(q + i), lo);
        s1 = vfmaq_f32(s1, vld1q_f32(q + i + 4), hi);
    }
    for (; i + 4 <= d; i += 4) s0 = vfmaq_f32(s0, vld1q_f32(q + i), cn_load_w(k, i, kt));
    float s = vaddvq_f32(vaddq_f32(s0, s1));
    for (; i < d; i++) s += q[i] * cn_load_w1(k, i, kt);
    return s;
}

/* scale * (q . k_j) for four consecutive key rows (d apart), as one vector. */
CN_INLINE float32x4_t dot4(const float *q, const void *k, int64_t d, float scale, const int kt) {
    float32x4_t s[4];
    for (int j = 0; j < 4; j++) s[j] = vdupq_n_f32(0);
    int64_t i = 0;
    for (; i + 4 <= d; i += 4) {
        const float32x4_t qv = vld1q_f32(q + i);
        for (int j = 0; j < 4; j++) s[j] = vfmaq_f32(s[j], qv, cn_load_w(k, j * d + i, kt));
    }
    float32x4_t r = vpaddq_f32(vpaddq_f32(s[0], s[1]), vpaddq_f32(s[2], s[3]));
    if (i < d) {
        float tail[4] = {0, 0, 0, 0};
        for (int j = 0; j < 4; j++)
            for (int64_t t = i; t < d; t++) tail[j] += q[t] * cn_load_w1(k, j * d + t, kt);
        r = vaddq_f32(r, vld1q_f32(tail));
    }
    return vmulq_f32(r, vdupq_n_f32(scale));
}

static void softcap_row(float *p, int64_t n, float cap) {
    float32x4_t c = vdupq_n_f32(cap), ic = vdupq_n_f32(1.0f / cap);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(p + i, vmulq_f32(c, cn_tanh(vmulq_f32(vld1q_f32(p + i), ic))));
    if (i < n) {
        float t[4] = {0};
        memcpy(t, p + i, (size_t)(n - i) * 4);
        vst1q_f32(t, vmulq_f32(c, cn_tanh(vmulq_f32(vld1q_f32(t), ic))));
        memcpy(p + i, t, (size_t)(n - i) * 4);
    }
}

typedef struct {
    const float *q, *mask;
    const void *k, *v; /* float32 or float16: the kt argument of the task functions */
    float *out;
    int64_t B, Hq, Hkv, L, S, d, q_offset, window, ms[4];
    int64_t kvs[2]; /* element strides of k and v over (batch, head); rows are d apart */
    int64_t gchunk; /* query heads of one KV head handled by one task */
    int causal, kt; /* kt: K/V type, read by the GEMM path (the row path specialises on it) */
    float scale, softcap;
} attn_args;

/* One task: query position i of batch b, query heads [h0, h0 + G) that all
 * read KV head hk.  Each key and value row is loaded once for all G heads,
 * which is what makes grouped-query decode cheap: K and V are read from
 * memory once per KV head, not once per query head. */
CN_INLINE void attn_task(const attn_args *a, int64_t b, int64_t hk, int64_t i, int64_t h0,
                         int64_t G, float *p, const float **qr, float **orow, const int kt) {
    const size_t es = cn_wsize(kt);
    const int64_t S = a->S, d = a->d, L = a->L;
    const int64_t kv = b * a->kvs[0] + hk * a->kvs[1], pos = a->q_offset + i;
    int64_t lo = 0, hi = S;
    if (a->causal) hi = CN_MAX(0, CN_MIN(S, pos + 1));
    if (a->window >= 0) lo = CN_MAX(0, pos - a->window + 1);
    const int64_t n = hi - lo;
    const char *kb = (const char *)a->k + (size_t)(kv + lo * d) * es;
    const char *vb = (const char *)a->v + (size_t)(kv + lo * d) * es;
    for (int64_t g = 0; g < G; g++) {
        qr[g] = a->q + ((b * a->Hq + h0 + g) * L + i) * d;
        orow[g] = a->out + ((b * a->Hq + h0 + g) * L + i) * d;
        memset(orow[g], 0, (size_t)d * 4);
    }
    if (n <= 0) return; /* every key hidden: the reference gives zeros */
    int64_t j = 0;
    const int avx = cn_attn_avx512_available();
    if (avx) cn_attn_scores_avx512(qr, G, kb, vb, kt, n, d, a->scale, p, S), j = n;
    for (; j + 4 <= n; j += 4) /* four keys at a time: one pairwise-add reduction */
        for (int64_t g = 0; g < G; g++)
            vst1q_f32(p + g * S + j, dot4(qr[g], kb + (size_t)(j * d) * es, d, a->scale, kt));
    for (; j < n; j++)
        for (int64_t g = 0; g < G; g++) p[g * S + j] = dot(qr[g], kb + (size_t)(j * d) * es, d, kt) * a->scale;
    for (int64_t g = 0; g < G; g++) {
        float *pg = p + g * S;
        if (a->softcap > 0.0f) softcap_row(pg, n, a->softcap);
        if (a->mask) {
            const float *mr = a->mask + b * a->ms[0] + (h0 + g) * a->ms[1] + i * a->ms[2] + lo * a->ms[3];
            for (int64_t jj = 0; jj < n; jj++) pg[jj] += mr[jj * a->ms[3]];
        }
        cn_softmax_row(pg, pg, n);
    }
    if (avx) {
        cn_attn_values_avx512(orow, G, vb, kt, n, d, p, S);
        return;
    }
    /* Values in blocks of VB keys that stay in L1 while every head of the
     * group and every 16-wide slice of the output accumulates in registers. */
    for (int64_t j0 = 0; j0 < n; j0 += VB) {
        const int64_t j1 = CN_MIN(n, j0 + VB);
        for (int64_t g = 0; g < G; g++) {
            const float *pg = p + g * S;
            float *o = orow[g];
            int64_t t = 0;
            for (; t + 16 <= d; t += 16) {
                float32x4_t o0 = vld1q_f32(o + t), o1 = vld1q_f32(o + t + 4);
                float32x4_t o2 = vld1q_f32(o + t + 8), o3 = vld1q_f32(o + t + 12);
                for (int64_t jj = j0; jj < j1; jj++) {
                    const void *vj = vb + (size_t)(jj * d) * es;
                    const float32x4_t w = vdupq_n_f32(pg[jj]);
                    float32x4_t l0, h0, l1, h1;
                    cn_load_w8(vj, t, kt, &l0, &h0);
                    cn_load_w8(vj, t + 8, kt, &l1, &h1);
                    o0 = vfmaq_f32(o0, w, l0);
                    o1 = vfmaq_f32(o1, w, h0);
                    o2 = vfmaq_f32(o2, w, l1);
                    o3 = vfmaq_f32(o3, w, h1);
                }
                vst1q_f32(o + t, o0);
                vst1q_f32(o + t + 4, o1);
                vst1q_f32(o + t + 8, o2);
                vst1q_f32(o + t + 12, o3);
            }
            for (; t < d; t++) {
                float acc = o[t];
                for (int64_t jj = j0; jj < j1; jj++) acc += pg[jj] * cn_load_w1(vb, jj * d + t, kt);
                o[t] = acc;
            }
        }
    }
}

/* Tasks [t0, t1) of the (B, Hkv, L, head chunk) grid. */
CN_INLINE void attn_tasks(const attn_args *a, int64_t t0, int64_t t1, const int kt) {
    const int64_t group = a->Hq / a->Hkv, chunks = (group + a->gchunk - 1) / a->gchunk;
    /* This thread's scratch: G score rows, and G query / output row pointers. */
    float *p = (float *)malloc(sizeof(float) * (size_t)(a->gchunk * a->S + 4));
    void **rows = (void **)malloc(sizeof(void *) * 2 * (size_t)a->gchunk);
    const float **qr = (const float **)rows;
    float **orow = (float **)(rows + a->gchunk);
    for (int64_t t = t0; t < t1; t++) {
        const int64_t gc = t % chunks, i = (t / chunks) % a->L;
        const int64_t hk = (t / (chunks * a->L)) % a->Hkv, b = t / (chunks * a->L * a->Hkv);
        const int64_t g0 = gc * a->gchunk, G = CN_MIN(a->gchunk, group - g0);
        attn_task(a, b, hk, i, hk * group + g0, G, p, qr, orow, kt);
    }
    free(rows);
    free(p);
}

static void attn_f32(const void *c, int64_t t0, int64_t t1) { attn_tasks(c, t0, t1, CN_F32); }
static void attn_f16(const void *c, int64_t t0, int64_t t1) { attn_tasks(c, t0, t1, CN_F16); }

/* ---- prefill through the AVX-512 GEMM ------------------------------------
 * Per (batch, KV head), the L rows of its G query heads are one (G*L, d)
 * matrix (they are contiguous in q), so scores = Q K^T and out = P V are two
 * products for the packed-panel kernel (gemm_avx512.c), which runs several
 * times faster than the row-at-a-time path above.  The step in between is the
 * same: scale, softcap, mask, softmax over the visible keys [lo, hi); hidden
 * keys get weight zero (a causal prompt computes and drops about half its
 * scores, still cheaper). */
typedef struct {
    const char *base; /* K or V rows of one (batch, KV head) */
    int64_t d;
    int kt;
} kv_fill_args;

static void fill_k(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    const kv_fill_args *f = c; /* weight row n = key n */
    const void *row = f->base + (size_t)(n * f->d) * cn_wsize(f->kt);
    for (int64_t k = k0; k < k1; k++) out[k - k0] = cn_load_w1(row, k, f->kt);
}

static void fill_vt(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {
    const kv_fill_args *f = c; /* weight row n = component n of every value row */
    for (int64_t k = k0; k < k1; k++) out[k - k0] = cn_load_w1(f->base, k * f->d + n, f->kt);
}

static void attn_gemm_tasks(const void *c, int64_t t0, int64_t t1) {
    const attn_args *a = c;
    const int kt = a->kt;
    const int64_t G = a->Hq / a->Hkv, L = a->L, S = a->S, d = a->d, M = G * L;
    float *p = (float *)malloc(sizeof(float) * (size_t)(M * S));
    if (!p) return; /* cn_attention checked this allocation first */
    for (int64_t t = t0; t < t1; t++) {
        const int64_t b = t / a->Hkv, hk = t % a->Hkv, h0 = hk * G;
        const size_t kv = (size_t)(b * a->kvs[0] + hk * a->kvs[1]) * cn_wsize(kt);
        const float *qm = a->q + (b * a->Hq + h0) * L * d;
        float *om = a->out + (b * a->Hq + h0) * L * d;
        const kv_fill_args fk = {(const char *)a->k + kv, d, kt}, fv = {(const char *)a->v + kv, d, kt};
        cn_gemm_panels(qm, M, d, S, NULL, p, 256, fill_k, &fk, 0, (S + 31) / 32);
        for (int64_t r = 0; r < M; r++) {
            const int64_t g = r / L, i = r % L, pos = a->q_offset + i;
            int64_t lo = 0, hi = S;
            if (a->causal) hi = CN_MAX(0, CN_MIN(S, pos + 1));
            if (a->window >= 0) lo = CN_MAX(0, pos - a->window + 1);
            float *pr = p + r * S;
            const int64_t n = CN_MAX(0, hi - lo);
            for (int64_t j = lo; j < lo + n; j++) pr[j] *= a->scale;
            if (n > 0) {
                if (a->softcap > 0.0f) softcap_row(pr + lo, n, a->softcap);
                if (a->mask) {
                    const float *mr = a->mask + b * a->ms[0] + (h0 + g) * a->ms[1] + i * a->ms[2];
                    for (int64_t j = lo; j < hi; j++) pr[j] += mr[j * a->ms[3]];
                }
                cn_softmax_row(pr + lo, pr + lo, n);
            }
            for (int64_t j = 0; j < lo && j < S; j++) pr[j] = 0.0f;
            for (int64_t j = CN_MAX(lo, hi); j < S; j++) pr[j] = 0.0f;
        }
        cn_gemm_panels(p, M, S, d, NULL, om, 256, fill_vt, &fv, 0, (d + 31) / 32);
    }
    free(p);
}

void cn_attention(const float *q, const void *k, const void *v, int kvtype, float *out,
                  int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t S, int64_t d,
                  float scale, int64_t q_offset, int causal, int64_t window, float softcap,
                  const float *mask, int64_t ms0, int64_t ms1, int64_t ms2, int64_t ms3,
                  int64_t kvs0, int64_t kvs1) {
    const int64_t group = Hq / Hkv, base = B * Hkv * L;
    if (L > 1 && cn_gemm_panels_available()) {
        void *probe = malloc(sizeof(float) * (size_t)(group * L * S));
        if (probe && cn_gemm_panels_fit(256)) {
            free(probe);
            attn_args a = {q, mask, k, v, out, B, Hq, Hkv, L, S, d, q_offset, window,
                           {ms0, ms1, ms2, ms3}, {kvs0, kvs1}, 1, causal, kvtype, scale, softcap};
            cn_parallel_for(B * Hkv, B * Hq * L * S * d, attn_gemm_tasks, &a);
            return;
        }
        free(probe);
    }
    /* Keep every thread busy in decode with few KV heads (MQA): split the
     * query heads of a KV head over tasks when there are too few tasks. */
    int64_t split = base >= 2 * cn_threads ? 1 : CN_MIN(group, (2 * cn_threads + base - 1) / base);
    const int64_t gchunk = (group + split - 1) / split;
    attn_args a = {q, mask, k, v, out, B, Hq, Hkv, L, S, d, q_offset, window,
                   {ms0, ms1, ms2, ms3}, {kvs0, kvs1}, gchunk, causal, kvtype, scale, softcap};
    const int64_t tasks = base * ((group + gchunk - 1) / gchunk);
    cn_parallel_for(tasks, B * Hq * L * S * d, kvtype == CN_F16 ? attn_f16 : attn_f32, &a);
}

/* ---- store new keys and values in the cache, then attend ---------------- */

/* float32 -> float16 bits, rounded to nearest even like numpy's astype. */
static uint16_t f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN stays NaN */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (and inf): inf */
    if (ax < 0x38800000u) { /* below 2^-14: a subnormal half, exact scaling then one rounding */
        float a;
        memcpy(&a, &ax, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));
    }
    return (uint16_t)(sign | ((ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13)); /* rebias, round */
}

static void store_f16(const float *src, uint16_t *dst, int64_t n) {
    int64_t i = 0;
#if CN_NATIVE
    for (; i + 4 <= n; i += 4) vst1_u16(dst + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
#elif defined(__F16C__)
    for (; i + 4 <= n; i += 4)
        _mm_storel_epi64((__m128i *)(void *)(dst + i), _mm_cvtps_ph(_mm_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
#endif
    for (; i < n; i++) dst[i] = f32_to_f16(src[i]);
}

int cn_cached_attention(const float *q, const float *k, const float *v, void *cache_k, void *cache_v, int kvtype,
                        float *out, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t d, int64_t max_len,
                        int64_t offset, float scale, int64_t window, float softcap, int own) {
    if (Hkv < 1 || Hq % Hkv || offset < 0 || L < 1 || offset + L > max_len || (kvtype != 0 && kvtype != 1)) return -1;
    const size_t es = kvtype ? 2 : 4;
    for (int64_t bh = 0; bh < B * Hkv; bh++) /* rows of d values, at offset in each (batch, head) */
        for (int t = 0; t < 2; t++) {
            const float *src = (t ? v : k) + bh * L * d;
            char *dst = (char *)(t ? cache_v : cache_k) + ((size_t)(bh * max_len + offset) * (size_t)d) * es;
            if (kvtype) store_f16(src, (uint16_t *)(void *)dst, L * d);
            else memcpy(dst, src, sizeof(float) * (size_t)(L * d));
        }
    if (own) /* the new rows as computed: contiguous float32 (B, Hkv, L, d) */
        cn_attention(q, k, v, 0, out, B, Hq, Hkv, L, L, d, scale, offset, 1, window, softcap, NULL, 0, 0, 0, 0,
                     Hkv * L * d, L * d);
    else
        cn_attention(q, cache_k, cache_v, kvtype, out, B, Hq, Hkv, L, offset + L, d, scale, offset, 1, window,
                     softcap, NULL, 0, 0, 0, 0, Hkv * max_len * d, max_len * d);
    return 0;
}
