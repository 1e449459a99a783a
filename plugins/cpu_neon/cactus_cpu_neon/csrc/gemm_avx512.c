/* Float linear on AVX-512 (and, for prefill, AVX2): the prefill microkernel for weights decoded into
 * packed panels, and the decode (matrix-vector) loop for 16/32-bit rows.
 *
 * Prefill is compute-bound.  Through SIMDe the NEON 4x4 tile of linear.c runs
 * on 128-bit vectors and reached ~43 GFLOP/s per core on the 2-core EPYC,
 * near the 128-bit FMA peak; llama.cpp's prefill is twice as fast.  Where the
 * compiler targets AVX-512, decoded weight panels go through this
 * outer-product kernel instead: 8 rows of x times 32 weight rows, 16 zmm
 * accumulators, each x value broadcast from memory and each panel vector
 * used eight times.  On arm64 NEON is the native width and linear.c's tile
 * stays.
 *
 * The panel holds kc steps of 32 weights: panel[k * 32 + j] is weight row
 * n0 + j at input k0 + k (rows past N are zero).  cn_gemm_panels drives it
 * for any weight format through a fill callback (float rows in linear.c,
 * CQ in cq.c, int4/int8 in affine.c). */
#include "neon_common.h"

#if defined(__AVX512F__)
#include <immintrin.h>

int cn_gemm_avx512_available(void) { return 1; }

/* Write (or add) an 8 x 32 accumulator tile to y; the masks cut the last columns. */
static inline void store8(__m512 c[8][2], float *y, int64_t ldy, __mmask16 m0, __mmask16 m1, int accumulate) {
    for (int i = 0; i < 8; i++) {
        float *yr = y + i * ldy;
        if (accumulate) {
            c[i][0] = _mm512_add_ps(c[i][0], _mm512_maskz_loadu_ps(m0, yr));
            c[i][1] = _mm512_add_ps(c[i][1], _mm512_maskz_loadu_ps(m1, yr + 16));
        }
        _mm512_mask_storeu_ps(yr, m0, c[i][0]);
        _mm512_mask_storeu_ps(yr + 16, m1, c[i][1]);
    }
}

/* y[m, n0 + j] (+)= sum_k x[m, k0 + k] * panel[k, j] for 8 rows from m. */
static void tile8(const float *x, int64_t ldx, const float *panel, int64_t kc, float *y, int64_t ldy,
                  __mmask16 m0, __mmask16 m1, int accumulate) {
    __m512 c[8][2];
    for (int i = 0; i < 8; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kc; k++) {
        const __m512 w0 = _mm512_loadu_ps(panel + 32 * k), w1 = _mm512_loadu_ps(panel + 32 * k + 16);
        for (int i = 0; i < 8; i++) {
            const __m512 xv = _mm512_set1_ps(x[i * ldx + k]);
            c[i][0] = _mm512_fmadd_ps(xv, w0, c[i][0]);
            c[i][1] = _mm512_fmadd_ps(xv, w1, c[i][1]);
        }
    }
    store8(c, y, ldy, m0, m1, accumulate);
}

/* The same for one row (the last M % 8 rows). */
static void tile1(const float *x, const float *panel, int64_t kc, float *y, __mmask16 m0, __mmask16 m1,
                  int accumulate) {
    __m512 c0 = _mm512_setzero_ps(), c1 = c0;
    for (int64_t k = 0; k < kc; k++) {
        const __m512 xv = _mm512_set1_ps(x[k]);
        c0 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(panel + 32 * k), c0);
        c1 = _mm512_fmadd_ps(xv, _mm512_loadu_ps(panel + 32 * k + 16), c1);
    }
    if (accumulate) {
        c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, y));
        c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, y + 16));
    }
    _mm512_mask_storeu_ps(y, m0, c0);
    _mm512_mask_storeu_ps(y + 16, m1, c1);
}

void cn_gemm_panel_avx512(const float *x, int64_t M, int64_t K, int64_t k0, int64_t kc,
                          const float *panel, float *y, int64_t N, int64_t n0, int accumulate) {
    const int64_t cols = CN_MIN(32, N - n0);
    const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
    const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    int64_t m = 0;
    for (; m + 8 <= M; m += 8) tile8(x + m * K + k0, K, panel, kc, y + m * N + n0, N, m0, m1, accumulate);
    for (; m < M; m++) tile1(x + m * K + k0, panel, kc, y + m * N + n0, m0, m1, accumulate);
}

/* ---- bfloat16 products (AVX512_BF16) -------------------------------------
 * vdpbf16ps multiplies pairs of bfloat16 and adds both products to a float32
 * lane: twice the FMAs of float32 per instruction (232 against 118 GFLOP/s
 * for this tile on one core of the EPYC).  Not exact: x and the weights are
 * rounded to 8-bit mantissas (about 2e-3 of a dot product), so it runs only
 * where the caller asks (CQ prefill, cq.c).  The packed panel then holds
 * pairs of inputs: panel16[(k / 2) * 64 + 2 j + k % 2] is weight row n0 + j
 * at input k0 + k, and x comes as bfloat16 pairs, xb[m * K / 2 + k / 2]. */
#if defined(__AVX512BF16__)

int cn_gemm_bf16_available(void) { return 1; }

void cn_to_bf16(const float *x, int64_t n, uint16_t *out) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(out + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) { /* round to nearest even, as the instruction does; NaN stays NaN */
        uint32_t u;
        memcpy(&u, x + i, 4);
        out[i] = (u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)(u >> 16 | 0x40u)
                                                 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
}

static void tile8_bf16(const uint32_t *x, int64_t ldx, const uint32_t *panel, int64_t kp, float *y, int64_t ldy,
                       __mmask16 m0, __mmask16 m1, int accumulate) {
    __m512 c[8][2];
    for (int i = 0; i < 8; i++) c[i][0] = c[i][1] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kp; k++) {
        const __m512bh w0 = (__m512bh)_mm512_loadu_si512(panel + 32 * k);
        const __m512bh w1 = (__m512bh)_mm512_loadu_si512(panel + 32 * k + 16);
        for (int i = 0; i < 8; i++) {
            const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[i * ldx + k]);
            c[i][0] = _mm512_dpbf16_ps(c[i][0], xv, w0);
            c[i][1] = _mm512_dpbf16_ps(c[i][1], xv, w1);
        }
    }
    store8(c, y, ldy, m0, m1, accumulate);
}

static void tile1_bf16(const uint32_t *x, const uint32_t *panel, int64_t kp, float *y, __mmask16 m0, __mmask16 m1,
                       int accumulate) {
    __m512 c0 = _mm512_setzero_ps(), c1 = c0;
    for (int64_t k = 0; k < kp; k++) {
        const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x[k]);
        c0 = _mm512_dpbf16_ps(c0, xv, (__m512bh)_mm512_loadu_si512(panel + 32 * k));
        c1 = _mm512_dpbf16_ps(c1, xv, (__m512bh)_mm512_loadu_si512(panel + 32 * k + 16));
    }
    if (accumulate) {
        c0 = _mm512_add_ps(c0, _mm512_maskz_loadu_ps(m0, y));
        c1 = _mm512_add_ps(c1, _mm512_maskz_loadu_ps(m1, y + 16));
    }
    _mm512_mask_storeu_ps(y, m0, c0);
    _mm512_mask_storeu_ps(y + 16, m1, c1);
}

/* The float panel[kc][32] (kc even) as bfloat16 input pairs, panel16[kc / 2][32]. */
static void pack_bf16(const float *panel, int64_t kc, uint32_t *panel16) {
    for (int64_t k = 0; k < kc; k += 2)
        for (int h = 0; h < 32; h += 16) {
            const __m512i a = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(panel + k * 32 + h)));
            const __m512i b = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(panel + k * 32 + 32 + h)));
            _mm512_storeu_si512(panel16 + k / 2 * 32 + h, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
        }
}

static void gemm_panel_bf16(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc,
                            const uint32_t *panel16, float *y, int64_t N, int64_t n0, int accumulate, int amx) {
    const int64_t cols = CN_MIN(32, N - n0);
    const __mmask16 m0 = (__mmask16)(cols >= 16 ? 0xffff : (1u << cols) - 1);
    const __mmask16 m1 = (__mmask16)(cols >= 32 ? 0xffff : cols > 16 ? (1u << (cols - 16)) - 1 : 0);
    const uint32_t *x = (const uint32_t *)(const void *)(xb + k0);
    int64_t m = amx ? cn_amx_rows(xb, M, K, k0, kc, panel16, y, N, n0, accumulate) : 0; /* 16-row blocks */
    for (; m + 8 <= M; m += 8) tile8_bf16(x + m * K / 2, K / 2, panel16, kc / 2, y + m * N + n0, N, m0, m1, accumulate);
    for (; m < M; m++) tile1_bf16(x + m * K / 2, panel16, kc / 2, y + m * N + n0, m0, m1, accumulate);
}

#else

int cn_gemm_bf16_available(void) { return 0; }
void cn_to_bf16(const float *x, int64_t n, uint16_t *out) { (void)x, (void)n, (void)out; }
static void pack_bf16(const float *panel, int64_t kc, uint32_t *panel16) { (void)panel, (void)kc, (void)panel16; }
static void gemm_panel_bf16(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc,
                            const uint32_t *panel16, float *y, int64_t N, int64_t n0, int accumulate, int amx) {
    (void)xb, (void)M, (void)K, (void)k0, (void)kc, (void)panel16, (void)y, (void)N, (void)n0, (void)accumulate;
    (void)amx;
}

#endif

/* rows[32][ld] (the first kc columns) to panel[kc][32].  16 x 16 blocks are
 * transposed in registers (four rounds of shuffles, a quarter of an
 * instruction per float), the kc % 16 tail one value at a time. */
static void transpose_rows(const float *rows, int64_t ld, int64_t kc, float *panel) {
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16)
        for (int h = 0; h < 2; h++) {
            __m512 r[16], t[16];
            for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(rows + (16 * h + i) * ld + k);
            for (int i = 0; i < 16; i += 2) {
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 16; i += 4)
                for (int j = 0; j < 2; j++) {
                    r[i + j] = _mm512_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(1, 0, 1, 0));
                    r[i + j + 2] = _mm512_shuffle_ps(t[i + j], t[i + j + 2], _MM_SHUFFLE(3, 2, 3, 2));
                }
            for (int i = 0; i < 16; i += 8)
                for (int j = 0; j < 4; j++) {
                    t[i + j] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], _MM_SHUFFLE(2, 0, 2, 0));
                    t[i + j + 4] = _mm512_shuffle_f32x4(r[i + j], r[i + j + 4], _MM_SHUFFLE(3, 1, 3, 1));
                }
            for (int j = 0; j < 8; j++) {
                r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], _MM_SHUFFLE(2, 0, 2, 0));
                r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], _MM_SHUFFLE(3, 1, 3, 1));
            }
            /* r[c] now holds column k + col[c] of the 16 rows (the shuffles swap 1 and 2 in each 4) */
            static const int col[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};
            for (int c = 0; c < 16; c++) _mm512_storeu_ps(panel + (k + col[c]) * 32 + 16 * h, r[c]);
        }
    for (; k < kc; k++)
        for (int j = 0; j < 32; j++) panel[k * 32 + j] = rows[j * ld + k];
}

#define CN_PANELS 1
#elif defined(__AVX2__) && defined(__FMA__)
/* ---- AVX2 without AVX-512 (session 11) ------------------------------------
 * The same panels through a 6 x 16 outer-product tile: twelve ymm
 * accumulators, two panel vectors and one broadcast fill the sixteen
 * registers, and each panel vector serves six rows of x.  Each 32-column
 * panel is done as two 16-column halves.  Through SIMDe the 4 x 4 tile of
 * linear.c ran at 128-bit width: 0.36x llama.cpp's prefill on a Zen 3 pair. */
#include <immintrin.h>

int cn_gemm_avx512_available(void) { return 0; }
int cn_gemm_bf16_available(void) { return 0; }
void cn_to_bf16(const float *x, int64_t n, uint16_t *out) { (void)x, (void)n, (void)out; }
static void pack_bf16(const float *panel, int64_t kc, uint32_t *panel16) { (void)panel, (void)kc, (void)panel16; }
static void gemm_panel_bf16(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc,
                            const uint32_t *panel16, float *y, int64_t N, int64_t n0, int accumulate, int amx) {
    (void)xb, (void)M, (void)K, (void)k0, (void)kc, (void)panel16, (void)y, (void)N, (void)n0, (void)accumulate;
    (void)amx;
}
void cn_gemv_avx512(const float *x, int64_t K, const void *w, int wt, const float *bias, float *y, int64_t n0,
                    int64_t n1) {
    (void)x, (void)K, (void)w, (void)wt, (void)bias, (void)y, (void)n0, (void)n1;
}

/* Lanes [0, cols) of a 16-column half (cols < 16 only in the last panel). */
CN_INLINE void store16(__m256 c0, __m256 c1, float *y, int cols, int accumulate) {
    float t[16];
    if (cols == 16) {
        if (accumulate) c0 = _mm256_add_ps(c0, _mm256_loadu_ps(y)), c1 = _mm256_add_ps(c1, _mm256_loadu_ps(y + 8));
        _mm256_storeu_ps(y, c0), _mm256_storeu_ps(y + 8, c1);
        return;
    }
    _mm256_storeu_ps(t, c0), _mm256_storeu_ps(t + 8, c1);
    for (int j = 0; j < cols; j++) y[j] = t[j] + (accumulate ? y[j] : 0.0f);
}

/* y[m .. m+6, 0 .. cols) (+)= six x rows times panel columns [0, 16) (panel row
 * stride 32).  Named accumulators, not an array: with an array GCC kept the twelve
 * sums on the stack and stored them every step (63 against 147 GFLOP/s for a
 * 512 x 2048 x 8192 product on two Zen 3 cores). */
static void tile6(const float *x, int64_t ldx, const float *panel, int64_t kc, float *y, int64_t ldy, int cols,
                  int accumulate) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0;
    __m256 d0 = a0, d1 = a0, e0 = a0, e1 = a0, f0 = a0, f1 = a0;
    const float *x0 = x, *x1 = x + ldx, *x2 = x + 2 * ldx, *x3 = x + 3 * ldx, *x4 = x + 4 * ldx, *x5 = x + 5 * ldx;
    for (int64_t k = 0; k < kc; k++) {
        const __m256 w0 = _mm256_loadu_ps(panel + 32 * k), w1 = _mm256_loadu_ps(panel + 32 * k + 8);
        __m256 v = _mm256_broadcast_ss(x0 + k);
        a0 = _mm256_fmadd_ps(v, w0, a0), a1 = _mm256_fmadd_ps(v, w1, a1);
        v = _mm256_broadcast_ss(x1 + k);
        b0 = _mm256_fmadd_ps(v, w0, b0), b1 = _mm256_fmadd_ps(v, w1, b1);
        v = _mm256_broadcast_ss(x2 + k);
        c0 = _mm256_fmadd_ps(v, w0, c0), c1 = _mm256_fmadd_ps(v, w1, c1);
        v = _mm256_broadcast_ss(x3 + k);
        d0 = _mm256_fmadd_ps(v, w0, d0), d1 = _mm256_fmadd_ps(v, w1, d1);
        v = _mm256_broadcast_ss(x4 + k);
        e0 = _mm256_fmadd_ps(v, w0, e0), e1 = _mm256_fmadd_ps(v, w1, e1);
        v = _mm256_broadcast_ss(x5 + k);
        f0 = _mm256_fmadd_ps(v, w0, f0), f1 = _mm256_fmadd_ps(v, w1, f1);
    }
    store16(a0, a1, y, cols, accumulate), store16(b0, b1, y + ldy, cols, accumulate);
    store16(c0, c1, y + 2 * ldy, cols, accumulate), store16(d0, d1, y + 3 * ldy, cols, accumulate);
    store16(e0, e1, y + 4 * ldy, cols, accumulate), store16(f0, f1, y + 5 * ldy, cols, accumulate);
}

/* One row (the last M % 6). */
static void tile1(const float *x, const float *panel, int64_t kc, float *y, int cols, int accumulate) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0;
    int64_t k = 0;
    for (; k + 2 <= kc; k += 2) { /* two chains per half: one FMA chain would wait on its latency */
        const __m256 u = _mm256_broadcast_ss(x + k), v = _mm256_broadcast_ss(x + k + 1);
        a0 = _mm256_fmadd_ps(u, _mm256_loadu_ps(panel + 32 * k), a0);
        a1 = _mm256_fmadd_ps(u, _mm256_loadu_ps(panel + 32 * k + 8), a1);
        b0 = _mm256_fmadd_ps(v, _mm256_loadu_ps(panel + 32 * k + 32), b0);
        b1 = _mm256_fmadd_ps(v, _mm256_loadu_ps(panel + 32 * k + 40), b1);
    }
    for (; k < kc; k++) {
        const __m256 u = _mm256_broadcast_ss(x + k);
        a0 = _mm256_fmadd_ps(u, _mm256_loadu_ps(panel + 32 * k), a0);
        a1 = _mm256_fmadd_ps(u, _mm256_loadu_ps(panel + 32 * k + 8), a1);
    }
    store16(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), y, cols, accumulate);
}

void cn_gemm_panel_avx512(const float *x, int64_t M, int64_t K, int64_t k0, int64_t kc,
                          const float *panel, float *y, int64_t N, int64_t n0, int accumulate) {
    for (int h = 0; h < 2; h++) {
        const int cols = (int)CN_MIN(16, N - n0 - 16 * h);
        if (cols <= 0) break;
        const float *ph = panel + 16 * h;
        float *yh = y + n0 + 16 * h;
        int64_t m = 0;
        for (; m + 6 <= M; m += 6) tile6(x + m * K + k0, K, ph, kc, yh + m * N, N, cols, accumulate);
        for (; m < M; m++) tile1(x + m * K + k0, ph, kc, yh + m * N, cols, accumulate);
    }
}

/* rows[32][ld] (the first kc columns) to panel[kc][32]: 8 x 8 blocks transposed in
 * registers (unpacks, shuffles, lane swaps: 24 instructions per 64 floats), the
 * kc % 8 tail one value at a time. */
static void transpose_rows(const float *rows, int64_t ld, int64_t kc, float *panel) {
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8)
        for (int b = 0; b < 4; b++) {
            __m256 r[8], t[8];
            for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(rows + (8 * b + i) * ld + k);
            for (int i = 0; i < 8; i += 2) {
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
            }
            for (int i = 0; i < 8; i += 4) {
                r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
            }
            /* r[0..3]: columns 0, 1, 2, 3 of rows 0-3 (low lane) and columns 4-7 (high lane); r[4..7] rows 4-7 */
            for (int c = 0; c < 4; c++) {
                _mm256_storeu_ps(panel + (k + c) * 32 + 8 * b, _mm256_permute2f128_ps(r[c], r[c + 4], 0x20));
                _mm256_storeu_ps(panel + (k + c + 4) * 32 + 8 * b, _mm256_permute2f128_ps(r[c], r[c + 4], 0x31));
            }
        }
    for (; k < kc; k++)
        for (int j = 0; j < 32; j++) panel[k * 32 + j] = rows[j * ld + k];
}
#define CN_PANELS 1
#endif

#ifdef CN_PANELS
int cn_gemm_panels_available(void) { return 1; }

/* Output panels [p0, p1) of 32 columns: fill decodes kc inputs of each weight
 * row, contiguously, into a row buffer that is then transposed into the panel
 * (once per call: every row of x meets each panel).  Decoding rows in order
 * and transposing in registers costs a fraction of writing each decoded value
 * to its panel slot directly (a store every 128 bytes): the fill took ~14% of
 * a 256-token CQ4 GEMM that way. */
void cn_gemm_panels(const float *x, int64_t M, int64_t K, int64_t N, const float *bias, float *y,
                    int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1) {
    cn_gemm_panels_bf16(x, NULL, M, K, N, bias, y, kc_max, fill, ctx, p0, p1);
}

/* With xb (x as bfloat16, K and kc_max even), the products are bfloat16 ones. */
void cn_gemm_panels_bf16(const float *x, const uint16_t *xb, int64_t M, int64_t K, int64_t N, const float *bias,
                         float *y, int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1) {
    float *panel = (float *)malloc(sizeof(float) * 80 * (size_t)kc_max);
    if (!panel) return; /* callers check an allocation of this size first (cn_gemm_panels_fit) */
    float *rows_buf = panel + 32 * kc_max;
    uint32_t *panel16 = (uint32_t *)(void *)(panel + 64 * kc_max);
    const int amx = xb && cn_amx_begin();
    for (int64_t p = p0; p < p1; p++) {
        const int64_t n0 = 32 * p, rows = CN_MIN(32, N - n0);
        for (int64_t k0 = 0; k0 < K; k0 += kc_max) {
            const int64_t kc = CN_MIN(kc_max, K - k0);
            for (int64_t j = 0; j < rows; j++) fill(ctx, n0 + j, k0, k0 + kc, rows_buf + j * kc_max);
            for (int64_t j = rows; j < 32; j++) memset(rows_buf + j * kc_max, 0, sizeof(float) * (size_t)kc);
            transpose_rows(rows_buf, kc_max, kc, panel);
            if (xb) {
                pack_bf16(panel, kc, panel16);
                gemm_panel_bf16(xb, M, K, k0, kc, panel16, y, N, n0, k0 > 0, amx);
            } else {
                cn_gemm_panel_avx512(x, M, K, k0, kc, panel, y, N, n0, k0 > 0);
            }
        }
        if (bias)
            for (int64_t m = 0; m < M; m++)
                for (int64_t j = 0; j < rows; j++) y[m * N + n0 + j] += bias[n0 + j];
    }
    if (amx) cn_amx_end();
    free(panel);
}

int cn_gemm_panels_fit(int64_t kc_max) {
    void *probe = malloc(sizeof(float) * 80 * (size_t)kc_max);
    free(probe);
    return probe != NULL;
}

#endif

#if defined(__AVX512F__)
/* ---- decode: float32 / float16 / bfloat16 rows -------------------------
 * One row at a time, four zmm accumulators: a single sequential stream per
 * thread is what the hardware prefetcher follows best.  linear.c's 4-row
 * NEON kernel read the 297 MiB float16 head of Qwen3-0.6B at ~10 GB/s on one
 * core; a one-row zmm loop reached ~18 GB/s in the same C test, close to a
 * plain integer sum of the same bytes (~20-22 GB/s at the time). */
CN_INLINE __m512 load16(const void *w, int64_t k, const int wt, __mmask16 m) {
    if (wt == CN_F32) return _mm512_maskz_loadu_ps(m, (const float *)w + k);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)w + k);
    if (wt == CN_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* bf16: the top half */
}

CN_INLINE void gemv_rows(const float *x, int64_t K, const void *w, const int wt, const float *bias, float *y,
                         int64_t n0, int64_t n1) {
    const size_t row_bytes = (size_t)K * (wt == CN_F32 ? 4 : 2);
    for (int64_t n = n0; n < n1; n++) {
        const void *r = (const char *)w + (size_t)n * row_bytes;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        int64_t k = 0;
        for (; k + 64 <= K; k += 64) {
            a0 = _mm512_fmadd_ps(load16(r, k, wt, 0xffff), _mm512_loadu_ps(x + k), a0);
            a1 = _mm512_fmadd_ps(load16(r, k + 16, wt, 0xffff), _mm512_loadu_ps(x + k + 16), a1);
            a2 = _mm512_fmadd_ps(load16(r, k + 32, wt, 0xffff), _mm512_loadu_ps(x + k + 32), a2);
            a3 = _mm512_fmadd_ps(load16(r, k + 48, wt, 0xffff), _mm512_loadu_ps(x + k + 48), a3);
        }
        for (; k < K; k += 16) {
            const __mmask16 m = (__mmask16)(K - k >= 16 ? 0xffff : (1u << (K - k)) - 1);
            a0 = _mm512_fmadd_ps(load16(r, k, wt, m), _mm512_maskz_loadu_ps(m, x + k), a0);
        }
        y[n] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3))) +
               (bias ? bias[n] : 0.0f);
    }
}

void cn_gemv_avx512(const float *x, int64_t K, const void *w, int wt, const float *bias, float *y, int64_t n0,
                    int64_t n1) {
    if (wt == CN_F32) gemv_rows(x, K, w, CN_F32, bias, y, n0, n1);
    else if (wt == CN_F16) gemv_rows(x, K, w, CN_F16, bias, y, n0, n1);
    else gemv_rows(x, K, w, CN_BF16, bias, y, n0, n1);
}

#elif !defined(CN_PANELS)

int cn_gemm_panels_available(void) { return 0; }

int cn_gemm_avx512_available(void) { return 0; }
int cn_gemm_panels_fit(int64_t kc_max) {
    (void)kc_max;
    return 0;
}
void cn_gemv_avx512(const float *x, int64_t K, const void *w, int wt, const float *bias, float *y, int64_t n0,
                    int64_t n1) {
    (void)x, (void)K, (void)w, (void)wt, (void)bias, (void)y, (void)n0, (void)n1;
}
void cn_gemm_panels(const float *x, int64_t M, int64_t K, int64_t N, const float *bias, float *y,
                    int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1) {
    (void)x, (void)M, (void)K, (void)N, (void)bias, (void)y, (void)kc_max, (void)fill, (void)ctx;
    (void)p0, (void)p1;
}
int cn_gemm_bf16_available(void) { return 0; }
void cn_to_bf16(const float *x, int64_t n, uint16_t *out) { (void)x, (void)n, (void)out; }
void cn_gemm_panels_bf16(const float *x, const uint16_t *xb, int64_t M, int64_t K, int64_t N, const float *bias,
                         float *y, int64_t kc_max, cn_panel_fill fill, const void *ctx, int64_t p0, int64_t p1) {
    (void)x, (void)xb, (void)M, (void)K, (void)N, (void)bias, (void)y, (void)kc_max, (void)fill, (void)ctx;
    (void)p0, (void)p1;
}
void cn_gemm_panel_avx512(const float *x, int64_t M, int64_t K, int64_t k0, int64_t kc,
                          const float *panel, float *y, int64_t N, int64_t n0, int accumulate) {
    (void)x, (void)M, (void)K, (void)k0, (void)kc, (void)panel, (void)y, (void)N, (void)n0, (void)accumulate;
}

#endif
