/* Row-wise and elementwise ops: embedding, RMSNorm, LayerNorm, RoPE,
 * softmax, activations and the Walsh-Hadamard transform.  These are memory
 * bound; cn_parallel_for threads them only when an array is big enough. */
#include "neon_common.h"

/* Light ops: a thread must get a few hundred thousand elements to pay off. */
#define LIGHT(n) ((n) / 8)

/* ---- activations -------------------------------------------------------- */

enum { ACT_SILU = 0, ACT_GELU = 1, ACT_GELU_TANH = 2, ACT_RELU = 3 };

CN_INLINE float32x4_t act4(float32x4_t x, const int kind) {
    if (kind == ACT_SILU)
        return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), cn_exp(vnegq_f32(x))));
    if (kind == ACT_GELU) return cn_gelu(x);
    if (kind == ACT_GELU_TANH) {
        float32x4_t x3 = vmulq_f32(vmulq_f32(x, x), x);
        float32x4_t inner = vmulq_f32(vdupq_n_f32(0.7978845608028654f),
                                      vfmaq_f32(x, x3, vdupq_n_f32(0.044715f)));
        float32x4_t t = vaddq_f32(vdupq_n_f32(1.0f), cn_tanh(inner));
        return vmulq_f32(vmulq_f32(vdupq_n_f32(0.5f), x), t);
    }
    return vmaxq_f32(x, vdupq_n_f32(0.0f));
}

typedef struct {
    const float *x, *up;
    float *out;
    int64_t n;
} act_args;

/* Vectors [v0, v1) of 4 lanes; the last range also takes the zero-padded tail. */
CN_INLINE void act_range(const act_args *a, int64_t v0, int64_t v1, const int kind) {
    if (kind == ACT_SILU) /* the gated MLP's activation, serial between two regions: AVX-512 where built */
        v0 += cn_silu_avx512(a->x + 4 * v0, a->up ? a->up + 4 * v0 : NULL, a->out + 4 * v0, 4 * (v1 - v0)) / 4;
    for (int64_t i = 4 * v0; i < 4 * v1; i += 4) {
        float32x4_t y = act4(vld1q_f32(a->x + i), kind);
        if (a->up) y = vmulq_f32(y, vld1q_f32(a->up + i));
        vst1q_f32(a->out + i, y);
    }
    const int64_t i0 = a->n - a->n % 4;
    if (4 * v1 == i0 && i0 < a->n) {
        float tx[4] = {0}, tu[4] = {0}, ty[4];
        memcpy(tx, a->x + i0, (size_t)(a->n - i0) * 4);
        if (a->up) memcpy(tu, a->up + i0, (size_t)(a->n - i0) * 4);
        float32x4_t y = act4(vld1q_f32(tx), kind);
        if (a->up) y = vmulq_f32(y, vld1q_f32(tu));
        vst1q_f32(ty, y);
        memcpy(a->out + i0, ty, (size_t)(a->n - i0) * 4);
    }
}

#define ACT_FN(name, kind) \
    static void name(const void *c, int64_t a, int64_t b) { act_range((const act_args *)c, a, b, kind); }
ACT_FN(act_silu, ACT_SILU)
ACT_FN(act_gelu, ACT_GELU)
ACT_FN(act_gelu_tanh, ACT_GELU_TANH)
ACT_FN(act_relu, ACT_RELU)

static void act_dispatch(const float *x, const float *up, float *out, int64_t n, int kind) {
    static const cn_range_fn fns[4] = {act_silu, act_gelu, act_gelu_tanh, act_relu};
    act_args a = {x, up, out, n};
    if (kind < 0 || kind > 3) kind = ACT_RELU;
    if (n < 4) { /* only a tail: run it as range [0, 0) */
        fns[kind](&a, 0, 0);
        return;
    }
    cn_parallel_for(n / 4, kind == ACT_RELU ? LIGHT(n) : n, fns[kind], &a);
}

void cn_activation(const float *x, float *out, int64_t n, int kind) {
    act_dispatch(x, NULL, out, n, kind);
}

void cn_gated_activation(const float *gate, const float *up, float *out, int64_t n, int kind) {
    act_dispatch(gate, up, out, n, kind);
}

/* ---- embedding ---------------------------------------------------------- */

typedef struct {
    const void *table;
    int wtype;
    int64_t D;
    const int64_t *ids;
    float *out;
} emb_args;

static void emb_range(const void *c, int64_t r0, int64_t r1) {
    const emb_args *a = c;
    const size_t row_bytes = (size_t)a->D * cn_wsize(a->wtype);
    for (int64_t r = r0; r < r1; r++) {
        const void *row = (const char *)a->table + (size_t)a->ids[r] * row_bytes;
        float *o = a->out + r * a->D;
        if (a->wtype == CN_F32) {
            memcpy(o, row, (size_t)a->D * 4);
            continue;
        }
        int64_t i = 0;
        for (; i + 4 <= a->D; i += 4) vst1q_f32(o + i, cn_load_w(row, i, a->wtype));
        for (; i < a->D; i++) o[i] = cn_load_w1(row, i, a->wtype);
    }
}

void cn_embedding(const void *table, int wtype, int64_t D, const int64_t *ids, int64_t n,
                  float *out) {
    emb_args a = {table, wtype, D, ids, out};
    cn_parallel_for(n, LIGHT(n * D), emb_range, &a);
}

/* ---- norms -------------------------------------------------------------- */

/* sum(x - sub) or sum((x - sub)^2) over a row, with eight partial sums. */
CN_INLINE float row_sum(const float *x, int64_t D, float sub, const int square) {
    float32x4_t a = vdupq_n_f32(0), b = a, s = vdupq_n_f32(sub);
    int64_t i = 0;
    for (; i + 8 <= D; i += 8) {
        float32x4_t u = vsubq_f32(vld1q_f32(x + i), s), v = vsubq_f32(vld1q_f32(x + i + 4), s);
        a = square ? vfmaq_f32(a, u, u) : vaddq_f32(a, u);
        b = square ? vfmaq_f32(b, v, v) : vaddq_f32(b, v);
    }
    for (; i + 4 <= D; i += 4) {
        float32x4_t u = vsubq_f32(vld1q_f32(x + i), s);
        a = square ? vfmaq_f32(a, u, u) : vaddq_f32(a, u);
    }
    float t = vaddvq_f32(vaddq_f32(a, b));
    for (; i < D; i++) t += square ? (x[i] - sub) * (x[i] - sub) : x[i] - sub;
    return t;
}

typedef struct {
    const float *x, *w, *b;
    float *out;
    int64_t D;
    float eps, offset;
} norm_args;

static void rms_range(const void *c, int64_t r0, int64_t r1) {
    const norm_args *a = c;
    const int64_t D = a->D;
    const float32x4_t voff = vdupq_n_f32(a->offset);
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = a->x + r * D;
        float *o = a->out + r * D;
        const float inv = 1.0f / sqrtf(row_sum(xr, D, 0.0f, 1) / (float)D + a->eps);
        const float32x4_t vinv = vdupq_n_f32(inv);
        int64_t i = 0;
        for (; i + 4 <= D; i += 4)
            vst1q_f32(o + i, vmulq_f32(vmulq_f32(vld1q_f32(xr + i), vinv),
                                       vaddq_f32(vld1q_f32(a->w + i), voff)));
        for (; i < D; i++) o[i] = xr[i] * inv * (a->w[i] + a->offset);
    }
}

void cn_rms_norm(const float *x, const float *w, float *out, int64_t rows, int64_t D, float eps,
                 int unit_offset) {
    norm_args a = {x, w, NULL, out, D, eps, unit_offset ? 1.0f : 0.0f};
    cn_parallel_for(rows, LIGHT(rows * D), rms_range, &a);
}

static void ln_range(const void *c, int64_t r0, int64_t r1) {
    const norm_args *a = c;
    const int64_t D = a->D;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = a->x + r * D;
        float *o = a->out + r * D;
        /* Two passes (mean, then variance about it) as the reference does:
         * one-pass E[x^2] - E[x]^2 cancels badly for large offsets. */
        const float mean = row_sum(xr, D, 0.0f, 0) / (float)D;
        const float inv = 1.0f / sqrtf(row_sum(xr, D, mean, 1) / (float)D + a->eps);
        const float32x4_t vm = vdupq_n_f32(mean), vinv = vdupq_n_f32(inv);
        int64_t i = 0;
        for (; i + 4 <= D; i += 4) {
            float32x4_t y = vmulq_f32(vsubq_f32(vld1q_f32(xr + i), vm), vinv);
            if (a->w) y = vmulq_f32(y, vld1q_f32(a->w + i));
            if (a->b) y = vaddq_f32(y, vld1q_f32(a->b + i));
            vst1q_f32(o + i, y);
        }
        for (; i < D; i++) {
            float y = (xr[i] - mean) * inv;
            if (a->w) y *= a->w[i];
            if (a->b) y += a->b[i];
            o[i] = y;
        }
    }
}

void cn_layer_norm(const float *x, const float *w, const float *b, float *out, int64_t rows,
                   int64_t D, float eps) {
    norm_args a = {x, w, b, out, D, eps, 0.0f};
    cn_parallel_for(rows, LIGHT(rows * D), ln_range, &a);
}

/* ---- rotary embedding --------------------------------------------------- */

typedef struct {
    const float *x, *cs, *sn;
    float *out;
    int64_t L, hd, half;
} rope_args;

static void rope_range(const void *c, int64_t r0, int64_t r1) {
    const rope_args *a = c;
    const int64_t hd = a->hd, half = a->half, rot = 2 * half;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = a->x + r * hd;
        const float *cs = a->cs + (r % a->L) * half, *sn = a->sn + (r % a->L) * half;
        float *o = a->out + r * hd;
        int64_t i = 0;
        for (; i + 4 <= half; i += 4) {
            float32x4_t x1 = vld1q_f32(xr + i), x2 = vld1q_f32(xr + half + i);
            float32x4_t vc = vld1q_f32(cs + i), vs = vld1q_f32(sn + i);
            vst1q_f32(o + i, vfmsq_f32(vmulq_f32(x1, vc), x2, vs));
            vst1q_f32(o + half + i, vfmaq_f32(vmulq_f32(x2, vc), x1, vs));
        }
        for (; i < half; i++) {
            float x1 = xr[i], x2 = xr[half + i];
            o[i] = x1 * cs[i] - x2 * sn[i];
            o[half + i] = x2 * cs[i] + x1 * sn[i];
        }
        if (rot < hd && o != xr) memcpy(o + rot, xr + rot, (size_t)(hd - rot) * 4);
    }
}

/* cos and sin of every (position, frequency): L x half each, in one buffer. */
static float *rope_table(int64_t L, int64_t half, const double *positions, const float *inv_freq) {
    /* Angles in double: positions reach 1e5 and more, where a float32
     * product would already be off by a large fraction of a radian. */
    float *cs = (float *)malloc(sizeof(float) * 2 * (size_t)(L * half + 1));
    if (!cs) return NULL;
    float *sn = cs + L * half;
    for (int64_t l = 0; l < L; l++)
        for (int64_t i = 0; i < half; i++) {
            double ang = positions[l] * (double)inv_freq[i];
            cs[l * half + i] = (float)cos(ang);
            sn[l * half + i] = (float)sin(ang);
        }
    return cs;
}

int cn_rope(const float *x, float *out, int64_t BH, int64_t L, int64_t hd,
            const double *positions, const float *inv_freq, int64_t half) {
    float *cs = rope_table(L, half, positions, inv_freq);
    if (!cs) return -2;
    rope_args a = {x, cs, cs + L * half, out, L, hd, half};
    cn_parallel_for(BH * L, LIGHT(BH * L * hd), rope_range, &a);
    free(cs);
    return 0;
}

/* QK-norm then RoPE, row by row: the normed row is rotated in place in out. */
typedef struct {
    rope_args r;
    norm_args n; /* n.w NULL: no norm */
} norm_rope_args;

static void norm_rope_range(const void *c, int64_t r0, int64_t r1) {
    const norm_rope_args *a = c;
    if (!a->n.w) {
        rope_range(&a->r, r0, r1);
        return;
    }
    rms_range(&a->n, r0, r1);
    rope_args r = a->r;
    r.x = r.out;
    rope_range(&r, r0, r1);
}

/* A decoded token calls rope_qk once per layer, at one position and (in every
 * model here) with the same frequencies: each thread keeps its last one-position
 * table, so a token computes its 2 x half cosines and sines in double once
 * instead of once per layer (~5 us each for half 64).  The same function of the
 * same inputs: the same bits. */
#define MEMO_HALF 256
static _Thread_local struct {
    double pos;
    int64_t half;
    float inv[MEMO_HALF];
    float cs[2 * MEMO_HALF];
} memo = {0.0, -1, {0}, {0}};

static const float *token_table(double pos, const float *inv_freq, int64_t half) {
    if (memo.half != half || memo.pos != pos || memcmp(memo.inv, inv_freq, sizeof(float) * (size_t)half)) {
        memo.half = -1; /* a table being rebuilt matches nothing */
        for (int64_t i = 0; i < half; i++) {
            const double ang = pos * (double)inv_freq[i]; /* as rope_table */
            memo.cs[i] = (float)cos(ang);
            memo.cs[half + i] = (float)sin(ang);
        }
        memcpy(memo.inv, inv_freq, sizeof(float) * (size_t)half);
        memo.pos = pos, memo.half = half;
    }
    return memo.cs;
}

int cn_rope_qk(const float *q, const float *k, float *q_out, float *k_out, int64_t BHq, int64_t BHk,
               int64_t L, int64_t hd, const double *positions, const float *inv_freq, int64_t half,
               const float *q_norm, const float *k_norm, float eps, int unit_offset) {
    float *own = NULL; /* once for queries and keys */
    const float *cs = L == 1 && half > 0 && half <= MEMO_HALF ? token_table(positions[0], inv_freq, half)
                                                             : (own = rope_table(L, half, positions, inv_freq));
    if (!cs) return -2;
    const float off = unit_offset ? 1.0f : 0.0f;
    norm_rope_args a = {{q, cs, cs + L * half, q_out, L, hd, half}, {q, q_norm, NULL, q_out, hd, eps, off}};
    cn_parallel_for(BHq * L, LIGHT(BHq * L * hd), norm_rope_range, &a);
    a.r.x = a.n.x = k, a.r.out = a.n.out = k_out, a.n.w = k_norm;
    cn_parallel_for(BHk * L, LIGHT(BHk * L * hd), norm_rope_range, &a);
    free(own);
    return 0;
}

/* ---- softmax ------------------------------------------------------------ */

void cn_softmax_row(const float *x, float *out, int64_t n) {
    float32x4_t vm = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) vm = vmaxq_f32(vm, vld1q_f32(x + i));
    float m = vmaxvq_f32(vm);
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    if (!(m > -INFINITY)) {
        memset(out, 0, (size_t)n * 4);
        return;
    }
    float32x4_t acc = vdupq_n_f32(0);
    vm = vdupq_n_f32(m);
    for (i = 0; i + 4 <= n; i += 4) {
        float32x4_t e = cn_exp(vsubq_f32(vld1q_f32(x + i), vm));
        vst1q_f32(out + i, e);
        acc = vaddq_f32(acc, e);
    }
    float sum = vaddvq_f32(acc);
    if (i < n) {
        float t[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, e[4];
        memcpy(t, x + i, (size_t)(n - i) * 4);
        vst1q_f32(e, cn_exp(vsubq_f32(vld1q_f32(t), vm)));
        for (int64_t j = i; j < n; j++) {
            out[j] = e[j - i];
            sum += e[j - i];
        }
    }
    const float inv = 1.0f / sum;
    for (i = 0; i + 4 <= n; i += 4) vst1q_f32(out + i, vmulq_f32(vld1q_f32(out + i), vdupq_n_f32(inv)));
    for (; i < n; i++) out[i] *= inv;
}

typedef struct {
    const float *x;
    float *out;
    int64_t n;
} rows_args;

static void softmax_range(const void *c, int64_t r0, int64_t r1) {
    const rows_args *a = c;
    for (int64_t r = r0; r < r1; r++) cn_softmax_row(a->x + r * a->n, a->out + r * a->n, a->n);
}

void cn_softmax(const float *x, float *out, int64_t rows, int64_t n) {
    rows_args a = {x, out, n};
    cn_parallel_for(rows, rows * n, softmax_range, &a);
}

/* ---- Walsh-Hadamard ----------------------------------------------------- */

/* In-place orthonormal FWHT of one block, Sylvester (natural) order. */
void cn_fwht_block(float *v, int64_t bs) {
    if (cn_fwht_avx512(v, bs)) return;
    if (bs >= 4) {
        /* Strides 1 and 2 live inside one vector: a lane swap plus a signed FMA. */
        const float s1[4] = {1, -1, 1, -1}, s2[4] = {1, 1, -1, -1};
        const float32x4_t m1 = vld1q_f32(s1), m2 = vld1q_f32(s2);
        for (int64_t i = 0; i < bs; i += 4) {
            float32x4_t a = vld1q_f32(v + i);
            a = vfmaq_f32(vrev64q_f32(a), a, m1);
            a = vfmaq_f32(vextq_f32(a, a, 2), a, m2);
            vst1q_f32(v + i, a);
        }
        for (int64_t h = 4; h < bs; h *= 2)
            for (int64_t i = 0; i < bs; i += 2 * h)
                for (int64_t j = i; j < i + h; j += 4) {
                    float32x4_t a = vld1q_f32(v + j), b = vld1q_f32(v + j + h);
                    vst1q_f32(v + j, vaddq_f32(a, b));
                    vst1q_f32(v + j + h, vsubq_f32(a, b));
                }
    } else if (bs == 2) {
        float a = v[0], b = v[1];
        v[0] = a + b;
        v[1] = a - b;
    }
    const float scale = 1.0f / sqrtf((float)bs);
    int64_t i = 0;
    for (; i + 4 <= bs; i += 4) vst1q_f32(v + i, vmulq_f32(vld1q_f32(v + i), vdupq_n_f32(scale)));
    for (; i < bs; i++) v[i] *= scale;
}

static void hadamard_range(const void *c, int64_t b0, int64_t b1) {
    const rows_args *a = c; /* n = block size here */
    for (int64_t b = b0; b < b1; b++) {
        memcpy(a->out + b * a->n, a->x + b * a->n, (size_t)a->n * 4);
        cn_fwht_block(a->out + b * a->n, a->n);
    }
}

void cn_hadamard(const float *x, float *out, int64_t rows, int64_t n, int64_t block) {
    rows_args a = {x, out, block};
    const int64_t blocks = rows * (n / block);
    cn_parallel_for(blocks, rows * n, hadamard_range, &a);
}
