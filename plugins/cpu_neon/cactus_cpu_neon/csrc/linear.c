/* linear: y = x @ w.T + bias, with w (N, K) in float32, float16 or bfloat16.
 *
 * Decode (M == 1) is a matrix-vector product bound by memory bandwidth: each
 * weight row is streamed once, four rows at a time so that eight independent
 * FMA chains hide latency and x is loaded once per four rows.
 *
 * Prefill (M > 1) is a dot-product-style GEMM over 4x4 output tiles (16
 * accumulators; each loaded x vector and weight vector is used four times).
 * K is cut into blocks so a 4-row weight tile stays in L1 while it meets
 * every row of x; the x block is reused from L2 across weight tiles.  16-bit
 * weights are widened in registers, never copied.  Threads split the output
 * columns (weight rows), so each weight byte is read by one thread only.
 * On AVX-512 builds gemm_avx512.c runs both paths instead (a one-row zmm
 * GEMV; widened rows packed into panels for its GEMM kernel). */
#include "neon_common.h"

#define KC 256

typedef struct {
    const float *x;
    int64_t M, K, N;
    const void *w;
    const float *bias;
    float *y;
    int wt; /* read by the AVX-512 decode loop; the NEON loops are specialised on it */
} linear_args;

/* ---- decode: matrix-vector ---------------------------------------------- */

CN_INLINE void gemv4(const float *x, int64_t K, const void *const r[4], const int wt,
                     float out[4]) {
    float32x4_t a[4], b[4];
    for (int i = 0; i < 4; i++) a[i] = b[i] = vdupq_n_f32(0);
    int64_t k = 0;
    for (; k + 8 <= K; k += 8) {
        float32x4_t x0 = vld1q_f32(x + k), x1 = vld1q_f32(x + k + 4);
        for (int i = 0; i < 4; i++) {
            float32x4_t lo, hi;
            cn_load_w8(r[i], k, wt, &lo, &hi);
            a[i] = vfmaq_f32(a[i], x0, lo);
            b[i] = vfmaq_f32(b[i], x1, hi);
        }
    }
    for (; k + 4 <= K; k += 4) {
        float32x4_t x0 = vld1q_f32(x + k);
        for (int i = 0; i < 4; i++) a[i] = vfmaq_f32(a[i], x0, cn_load_w(r[i], k, wt));
    }
    for (int i = 0; i < 4; i++) out[i] = vaddvq_f32(vaddq_f32(a[i], b[i]));
    for (; k < K; k++)
        for (int i = 0; i < 4; i++) out[i] += x[k] * cn_load_w1(r[i], k, wt);
}

/* Output tiles [t0, t1) of four rows each. */
CN_INLINE void gemv_tiles(const linear_args *a, int64_t t0, int64_t t1, const int wt) {
    const size_t row_bytes = (size_t)a->K * cn_wsize(wt);
    for (int64_t t = t0; t < t1; t++) {
        const void *r[4];
        for (int i = 0; i < 4; i++) /* a tail tile repeats the last row */
            r[i] = (const char *)a->w + (size_t)CN_MIN(4 * t + i, a->N - 1) * row_bytes;
        float out[4];
        gemv4(a->x, a->K, r, wt, out);
        for (int i = 0; i < 4 && 4 * t + i < a->N; i++)
            a->y[4 * t + i] = out[i] + (a->bias ? a->bias[4 * t + i] : 0.0f);
    }
}

/* ---- prefill: matrix-matrix --------------------------------------------- */

/* acc[i][j] = dot(xr[i][k0:k1], wr[j][k0:k1]). */
CN_INLINE void tile4x4(const float *const xr[4], const void *const wr[4], int64_t k0,
                       int64_t k1, const int wt, float acc[4][4]) {
    float32x4_t c[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) c[i][j] = vdupq_n_f32(0);
    int64_t k = k0;
    for (; k + 8 <= k1; k += 8) {
        float32x4_t wl[4], wh[4];
        for (int j = 0; j < 4; j++) cn_load_w8(wr[j], k, wt, &wl[j], &wh[j]);
        for (int i = 0; i < 4; i++) {
            float32x4_t xl = vld1q_f32(xr[i] + k), xh = vld1q_f32(xr[i] + k + 4);
            for (int j = 0; j < 4; j++) c[i][j] = vfmaq_f32(vfmaq_f32(c[i][j], xl, wl[j]), xh, wh[j]);
        }
    }
    for (; k + 4 <= k1; k += 4) {
        float32x4_t wv[4];
        for (int j = 0; j < 4; j++) wv[j] = cn_load_w(wr[j], k, wt);
        for (int i = 0; i < 4; i++) {
            float32x4_t xv = vld1q_f32(xr[i] + k);
            for (int j = 0; j < 4; j++) c[i][j] = vfmaq_f32(c[i][j], xv, wv[j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] = vaddvq_f32(c[i][j]);
    for (; k < k1; k++) {
        float wk[4];
        for (int j = 0; j < 4; j++) wk[j] = cn_load_w1(wr[j], k, wt);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) acc[i][j] += xr[i][k] * wk[j];
    }
}

void cn_tile4x4_f32(const float *const xr[4], const float *const wr[4], int64_t k0, int64_t k1,
                    float acc[4][4]) {
    tile4x4(xr, (const void *const *)wr, k0, k1, CN_F32, acc);
}

/* Output column tiles [t0, t1) for every row of x. */
CN_INLINE void gemm_band(const linear_args *a, int64_t t0, int64_t t1, const int wt) {
    const int64_t M = a->M, K = a->K, N = a->N, mtiles = (M + 3) / 4;
    const size_t row_bytes = (size_t)K * cn_wsize(wt);
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t k1 = CN_MIN(K, k0 + KC);
        for (int64_t t = t0; t < t1; t++) {
            const void *wr[4];
            for (int j = 0; j < 4; j++)
                wr[j] = (const char *)a->w + (size_t)CN_MIN(4 * t + j, N - 1) * row_bytes;
            for (int64_t mt = 0; mt < mtiles; mt++) {
                const float *xr[4];
                for (int i = 0; i < 4; i++) xr[i] = a->x + CN_MIN(4 * mt + i, M - 1) * K;
                float acc[4][4];
                tile4x4(xr, wr, k0, k1, wt, acc);
                for (int i = 0; i < 4 && 4 * mt + i < M; i++) {
                    float *yr = a->y + (4 * mt + i) * N;
                    for (int j = 0; j < 4 && 4 * t + j < N; j++) {
                        int64_t n = 4 * t + j;
                        yr[n] = k0 == 0 ? acc[i][j] + (a->bias ? a->bias[n] : 0.0f)
                                        : yr[n] + acc[i][j];
                    }
                }
            }
        }
    }
}

/* Prefill on AVX-512 (gemm_avx512.c): weights [k0, k1) of row n, widened. */
CN_INLINE void fill_row(const linear_args *a, int64_t n, int64_t k0, int64_t k1, float *out, const int wt) {
    const void *row = (const char *)a->w + (size_t)n * (size_t)a->K * cn_wsize(wt);
    int64_t k = k0;
    for (; k + 4 <= k1; k += 4) vst1q_f32(out + k - k0, cn_load_w(row, k, wt));
    for (; k < k1; k++) out[k - k0] = cn_load_w1(row, k, wt);
}

#define CN_PANELS(wt, suffix)                                                                       \
    static void fill_##suffix(const void *c, int64_t n, int64_t k0, int64_t k1, float *out) {      \
        fill_row(c, n, k0, k1, out, wt);                                                            \
    }                                                                                               \
    static void panels_##suffix(const void *c, int64_t p0, int64_t p1) {                           \
        const linear_args *a = c;                                                                   \
        cn_gemm_panels(a->x, a->M, a->K, a->N, a->bias, a->y, KC, fill_##suffix, a, p0, p1);        \
    }
CN_PANELS(CN_F32, f32)
CN_PANELS(CN_F16, f16)
CN_PANELS(CN_BF16, bf16)

static void gemv_avx512(const void *c, int64_t n0, int64_t n1) {
    const linear_args *a = c;
    cn_gemv_avx512(a->x, a->K, a->w, a->wt, a->bias, a->y, n0, n1);
}

/* One instantiation per weight type and path, so each inner loop has its loads fixed. */
#define CN_LINEAR_RANGE(name, body, wt)                                                   \
    static void name(const void *ctx, int64_t t0, int64_t t1) { body((const linear_args *)ctx, t0, t1, wt); }
CN_LINEAR_RANGE(gemv_f32, gemv_tiles, CN_F32)
CN_LINEAR_RANGE(gemv_f16, gemv_tiles, CN_F16)
CN_LINEAR_RANGE(gemv_bf16, gemv_tiles, CN_BF16)
CN_LINEAR_RANGE(gemm_f32, gemm_band, CN_F32)
CN_LINEAR_RANGE(gemm_f16, gemm_band, CN_F16)
CN_LINEAR_RANGE(gemm_bf16, gemm_band, CN_BF16)

void cn_linear(const float *x, int64_t M, int64_t K, const void *w, int wtype, int64_t N,
               const float *bias, float *y) {
    if (M <= 0 || N <= 0 || wtype < CN_F32 || wtype > CN_BF16) return;
    if (K == 0) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) y[m * N + n] = bias ? bias[n] : 0.0f;
        return;
    }
    static const cn_range_fn gemv_fns[3] = {gemv_f32, gemv_f16, gemv_bf16};
    static const cn_range_fn gemm_fns[3] = {gemm_f32, gemm_f16, gemm_bf16};
    static const cn_range_fn panel_fns[3] = {panels_f32, panels_f16, panels_bf16};
    linear_args a = {x, M, K, N, w, bias, y, wtype};
    if (M == 1 && cn_gemm_avx512_available())
        cn_parallel_for(N, N * K, gemv_avx512, &a);
    else if (M > 1 && cn_gemm_panels_available() && cn_gemm_panels_fit(KC))
        cn_parallel_for((N + 31) / 32, M * N * K, panel_fns[wtype], &a);
    else
        cn_parallel_for((N + 3) / 4, M * N * K, M == 1 ? gemv_fns[wtype] : gemm_fns[wtype], &a);
}

/* One-row products of several weights of one x in one parallel region
 * (fused.c): weight i owns work units [end[i - 1], end[i]), rows for the
 * AVX-512 loop and quads of rows for the NEON one, each in its own range. */
void cn_linear_gemv_multi(const float *x, int64_t K, int n, const cn_float_weight *w, float *y) {
    static const cn_range_fn gemv_fns[3] = {gemv_f32, gemv_f16, gemv_bf16};
    const int avx = cn_gemm_avx512_available();
    linear_args a[CN_MULTI_MAX];
    cn_multi_range m;
    m.n = n;
    int64_t units = 0, rows = 0;
    for (int i = 0; i < n; i++) {
        a[i] = (linear_args){x, 1, K, w[i].N, w[i].w, w[i].bias, y + rows, w[i].wtype};
        m.ctx[i] = &a[i];
        m.fn[i] = avx ? gemv_avx512 : gemv_fns[w[i].wtype];
        units += avx ? w[i].N : (w[i].N + 3) / 4;
        rows += w[i].N;
        m.end[i] = units;
    }
    cn_parallel_for(units, rows * K, cn_multi_range_run, &m);
}
