/* C-level check of the cpu_neon kernels on real AArch64 NEON (or under
 * qemu-aarch64): every kernel against a plain scalar reference in double
 * precision, written here independently of the kernels.
 *
 * Build with aarch64-linux-gnu-gcc -O2 -static -fopenmp, the kernel sources
 * (every .c file of csrc/) and this file, then run the binary
 * under qemu-aarch64; test_native_neon.py does exactly that, and
 * docs/cpu_neon.md gives the commands.
 * No SIMDe include path is given, so this only compiles on the native path.
 * Prints one line per check and exits with the number of failures. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cactus_neon.h"

static int failures = 0;
static uint64_t seed = 0x9e3779b97f4a7c15ull;

static float frand(void) { /* uniform in [-1, 1), deterministic */
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((seed >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

static float *fill(int64_t n, float scale) {
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

/* max |got - want| / (atol + rtol |want|) must stay <= 1 */
static void check(const char *name, const float *got, const double *want, int64_t n, double rtol,
                  double atol) {
    double worst = 0, err = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        double r = e / (atol + rtol * fabs(want[i]));
        if (r > worst || isnan(got[i]) != isnan(want[i])) worst = isnan(got[i]) != isnan(want[i]) ? INFINITY : r;
        if (e > err) err = e;
    }
    int ok = worst <= 1.0;
    failures += !ok;
    printf("%s %-34s max abs err %.3g\n", ok ? "ok  " : "FAIL", name, err);
}

/* Reference float16 -> double, decoded field by field. */
static double half_ref(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static uint16_t to_half(float f) { /* round-to-nearest for test data; tiny values flush to zero */
    int e;
    double m = frexp(f, &e);
    uint16_t s = f < 0 ? 0x8000 : 0;
    if (fabs(f) < 6.2e-5) return s;
    int mant = (int)lround(fabs(m) * 2048) - 1024;
    if (mant == 1024) { mant = 0; e++; }
    return s | (uint16_t)((e + 14) << 10) | (uint16_t)mant;
}

static void test_linear(int64_t M, int64_t K, int64_t N, int wtype) {
    float *x = fill(M * K, 1), *w32 = fill(N * K, 0.1f), *b = fill(N, 1), *y = fill(M * N, 0);
    uint16_t *w16 = malloc(2 * (size_t)(N * K));
    double *want = malloc(sizeof(double) * (size_t)(M * N)), *wd = malloc(sizeof(double) * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) {
        if (wtype == 0) wd[i] = w32[i];
        else if (wtype == 1) { w16[i] = to_half(w32[i]); wd[i] = half_ref(w16[i]); }
        else { uint32_t u; memcpy(&u, &w32[i], 4); w16[i] = u >> 16; u = (uint32_t)w16[i] << 16; float f; memcpy(&f, &u, 4); wd[i] = f; }
    }
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = b[n];
            for (int64_t k = 0; k < K; k++) s += (double)x[m * K + k] * wd[n * K + k];
            want[m * N + n] = s;
        }
    cn_linear(x, M, K, wtype ? (const void *)w16 : (const void *)w32, wtype, N, b, y);
    char name[64];
    snprintf(name, sizeof name, "linear %s M=%lld K=%lld N=%lld", wtype == 0 ? "f32" : wtype == 1 ? "f16" : "bf16",
             (long long)M, (long long)K, (long long)N);
    check(name, y, want, M * N, 1e-5, 1e-5);
    free(x); free(w32); free(b); free(y); free(w16); free(want); free(wd);
}

static void test_f16_all_patterns(void) {
    uint16_t *t = malloc(2 * 65536);
    int64_t *ids = malloc(8 * 8192);
    float *out = malloc(4 * 65536);
    double *want = malloc(8 * 65536);
    for (int i = 0; i < 65536; i++) { t[i] = (uint16_t)i; want[i] = half_ref((uint16_t)i); }
    for (int i = 0; i < 8192; i++) ids[i] = i;
    cn_embedding(t, 1, 8, ids, 8192, out);
    check("f16 widening, all 65536 patterns", out, want, 65536, 0, 0);
    free(t); free(ids); free(out); free(want);
}

static void test_norms(void) {
    const int64_t R = 5, D = 67;
    float *x = fill(R * D, 3), *w = fill(D, 1), *b = fill(D, 1), *y = fill(R * D, 0);
    double *want = malloc(8 * (size_t)(R * D));
    for (int64_t r = 0; r < R; r++) {
        double ss = 0;
        for (int64_t i = 0; i < D; i++) ss += (double)x[r * D + i] * x[r * D + i];
        double inv = 1 / sqrt(ss / D + 1e-6);
        for (int64_t i = 0; i < D; i++) want[r * D + i] = x[r * D + i] * inv * (1.0 + w[i]);
    }
    cn_rms_norm(x, w, y, R, D, 1e-6f, 1);
    check("rms_norm (unit offset)", y, want, R * D, 1e-5, 1e-6);
    for (int64_t r = 0; r < R; r++) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; i++) mean += x[r * D + i];
        mean /= D;
        for (int64_t i = 0; i < D; i++) var += (x[r * D + i] - mean) * (x[r * D + i] - mean);
        double inv = 1 / sqrt(var / D + 1e-5);
        for (int64_t i = 0; i < D; i++) want[r * D + i] = (x[r * D + i] - mean) * inv * w[i] + b[i];
    }
    cn_layer_norm(x, w, b, y, R, D, 1e-5f);
    check("layer_norm", y, want, R * D, 1e-5, 1e-6);
    free(x); free(w); free(b); free(y); free(want);
}

static void test_rope(void) {
    const int64_t BH = 3, L = 4, hd = 40, half = 12; /* rotary dim 24 < head dim */
    float *x = fill(BH * L * hd, 1), *y = fill(BH * L * hd, 0), inv[12];
    double pos[4] = {0, 7, 1000, 65537}, *want = malloc(8 * (size_t)(BH * L * hd));
    for (int i = 0; i < half; i++) inv[i] = (float)pow(10000.0, -2.0 * i / 24);
    for (int64_t r = 0; r < BH * L; r++) {
        const float *xr = x + r * hd;
        for (int64_t i = 0; i < hd; i++) want[r * hd + i] = xr[i];
        for (int64_t i = 0; i < half; i++) {
            double a = pos[r % L] * (double)inv[i], c = (float)cos(a), s = (float)sin(a);
            want[r * hd + i] = xr[i] * c - xr[half + i] * s;
            want[r * hd + half + i] = xr[half + i] * c + xr[i] * s;
        }
    }
    cn_rope(x, y, BH, L, hd, pos, inv, half);
    check("rope (partial rotary)", y, want, BH * L * hd, 1e-5, 1e-6);
    free(x); free(y); free(want);
}

static double act_ref(double v, int kind) {
    if (kind == 0) return v / (1 + exp(-v));
    if (kind == 1) return 0.5 * v * erfc(-v / sqrt(2.0));
    if (kind == 2) return 0.5 * v * (1 + tanh(sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    return v > 0 ? v : 0;
}

static void test_activations(void) {
    const int64_t n = 4099;
    const char *names[4] = {"silu", "gelu (erf)", "gelu_tanh", "relu"};
    float *x = fill(n, 12), *up = fill(n, 1), *y = fill(n, 0);
    double *want = malloc(8 * (size_t)n);
    for (int kind = 0; kind < 4; kind++) {
        for (int64_t i = 0; i < n; i++) want[i] = act_ref(x[i], kind) * up[i];
        cn_gated_activation(x, up, y, n, kind);
        char name[64];
        snprintf(name, sizeof name, "gated %s", names[kind]);
        check(name, y, want, n, 2e-6, 1e-7);
    }
    free(x); free(up); free(y); free(want);
}

static void test_softmax_hadamard(void) {
    const int64_t R = 3, n = 131;
    float *x = fill(R * n, 30), *y = fill(R * n, 0);
    double *want = malloc(8 * (size_t)(R * n));
    for (int64_t r = 0; r < R; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t i = 0; i < n; i++) m = fmax(m, x[r * n + i]);
        for (int64_t i = 0; i < n; i++) s += exp(x[r * n + i] - m);
        for (int64_t i = 0; i < n; i++) want[r * n + i] = exp(x[r * n + i] - m) / s;
    }
    cn_softmax(x, y, R, n);
    check("softmax", y, want, R * n, 1e-5, 1e-9);
    const int64_t bs = 64, rows = 3, width = 128;
    float *h = fill(rows * width, 1), *hy = fill(rows * width, 0);
    double *hw = malloc(8 * (size_t)(rows * width));
    for (int64_t blk = 0; blk < rows * width / bs; blk++)
        for (int64_t i = 0; i < bs; i++) {
            double s = 0; /* Sylvester order: H[i][j] = (-1)^popcount(i & j) */
            for (int64_t j = 0; j < bs; j++) s += (__builtin_popcountll(i & j) & 1 ? -1.0 : 1.0) * h[blk * bs + j];
            hw[blk * bs + i] = s / sqrt((double)bs);
        }
    cn_hadamard(h, hy, rows, width, bs);
    check("hadamard (block 64)", hy, hw, rows * width, 1e-5, 1e-6);
    free(x); free(y); free(want); free(h); free(hy); free(hw);
}

/* Hq / Hkv query heads share a KV head; decode shapes (L = 1) with d a
 * multiple of 16 take the AVX-512 row kernel's unmasked path on such builds,
 * d = 36 its masked one, and groups of 1-8 heads its 1-4-head passes. */
static void test_attention_heads(int64_t L, int64_t S, int64_t off, int64_t window, float cap, int half, int64_t Hq,
                                 int64_t Hkv, int64_t d) {
    const int64_t B = 2, group = Hq / Hkv;
    float *q = fill(B * Hq * L * d, 1), *k = fill(B * Hkv * S * d, 1), *v = fill(B * Hkv * S * d, 1);
    uint16_t *k16 = malloc(2 * (size_t)(B * Hkv * S * d)), *v16 = malloc(2 * (size_t)(B * Hkv * S * d));
    for (int64_t i = 0; half && i < B * Hkv * S * d; i++) { /* the reference then uses the rounded values */
        k16[i] = to_half(k[i]);
        v16[i] = to_half(v[i]);
        k[i] = (float)half_ref(k16[i]);
        v[i] = (float)half_ref(v16[i]);
    }
    float *o = fill(B * Hq * L * d, 0), *mask = fill(S, 2); /* broadcast over b, h, i */
    double *want = calloc((size_t)(B * Hq * L * d), 8), *p = malloc(8 * (size_t)S), scale = 1 / 6.0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < L; i++) {
                const float *qr = q + ((b * Hq + h) * L + i) * d;
                const float *kb = k + (b * Hkv + h / group) * S * d, *vb = v + (b * Hkv + h / group) * S * d;
                double m = -INFINITY, s = 0;
                for (int64_t j = 0; j < S; j++) {
                    double dot = 0;
                    for (int64_t t = 0; t < d; t++) dot += (double)qr[t] * kb[j * d + t];
                    dot *= scale;
                    if (cap > 0) dot = cap * tanh(dot / cap);
                    int hidden = j > off + i || (window >= 0 && j <= off + i - window);
                    p[j] = hidden ? -INFINITY : dot + mask[j];
                    m = fmax(m, p[j]);
                }
                for (int64_t j = 0; j < S; j++) s += p[j] = exp(p[j] - m);
                double *w = want + ((b * Hq + h) * L + i) * d;
                for (int64_t j = 0; j < S; j++)
                    for (int64_t t = 0; t < d; t++) w[t] += p[j] / s * vb[j * d + t];
            }
    cn_attention(q, half ? (const void *)k16 : k, half ? (const void *)v16 : v, half, o, B, Hq, Hkv, L, S,
                 d, (float)scale, off, 1, window, cap, mask, 0, 0, 0, 1, Hkv * S * d, S * d);
    char name[96];
    snprintf(name, sizeof name, "attention%s L=%lld S=%lld w=%lld cap=%g heads %lld/%lld d=%lld",
             half ? " f16 kv" : "", (long long)L, (long long)S, (long long)window, cap, (long long)Hq,
             (long long)Hkv, (long long)d);
    check(name, o, want, B * Hq * L * d, 1e-5, 1e-6);
    free(q); free(k); free(v); free(o); free(mask); free(want); free(p); free(k16); free(v16);
}

static void test_attention(int64_t L, int64_t S, int64_t off, int64_t window, float cap, int half) {
    test_attention_heads(L, S, off, window, cap, half, 4, 2, 36);
}

/* CQ: random codes, scales and codebook; reference decodes the bit stream bit by bit.
 * With rotate, the kernel also applies the input rotation x' = H(x * signs)
 * (blocks of 64), which the reference does with the Sylvester matrix. */
static int cq_bf16 = 0; /* ask test_cq's prefill for bfloat16 products (AVX512_BF16 only) */

static void test_cq(int bits, int d, int64_t M, int64_t group, int rotate) {
    const int64_t N = 150, K = 256, nv = K / d, stride = (nv * bits + 7) / 8, block = 64;
    uint8_t *codes = calloc((size_t)(N * stride), 1);
    uint16_t *scales = malloc(2 * (size_t)(N * K / group));
    float *cb = fill((1 << bits) * d, 1), *x = fill(M * K, 1), *y = fill(M * N, 0);
    double *want = calloc((size_t)(M * N), 8), *xr = calloc((size_t)(M * K), 8);
    for (int64_t i = 0; i < (1 << bits) * d; i++) cb[i] = (float)half_ref(to_half(cb[i])); /* stored as float16 */
    float *signs = malloc(sizeof(float) * (size_t)K);
    for (int64_t k = 0; k < K; k++) signs[k] = 1.0f;
    for (int64_t k = 0; k < K && rotate; k++) signs[k] = frand() < 0 ? -1.0f : 1.0f;
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) {
            if (!rotate) {
                xr[m * K + k] = x[m * K + k];
                continue;
            }
            const int64_t b0 = k / block * block;
            for (int64_t j = b0; j < b0 + block; j++) {
                const double h = __builtin_popcountll((unsigned long long)((k - b0) & (j - b0))) & 1 ? -1 : 1;
                xr[m * K + k] += h / sqrt((double)block) * x[m * K + j] * signs[j];
            }
        }
    for (int64_t i = 0; i < N * stride; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
    for (int64_t i = 0; i < N * K / group; i++) scales[i] = to_half(0.5f + 0.25f * frand());
    for (int64_t n = 0; n < N; n++)
        for (int64_t v = 0; v < nv; v++) {
            uint32_t code = 0;
            for (int b = 0; b < bits; b++) {
                int64_t bit = v * bits + b;
                code |= (uint32_t)((codes[n * stride + bit / 8] >> (bit % 8)) & 1) << b;
            }
            double s = half_ref(scales[n * (K / group) + v * d / group]);
            for (int64_t m = 0; m < M; m++)
                for (int e = 0; e < d; e++) want[m * N + n] += s * cb[code * d + e] * xr[m * K + v * d + e];
        }
    int rc = cn_cq_linear(x, M, K, codes, stride, bits, d, scales, group, cb, rotate ? signs : NULL,
                          block, N, NULL, y, cq_bf16);
    char name[80];
    const int inexact = cq_bf16 && M > 1 && cn_gemm_bf16_available();
    snprintf(name, sizeof name, "cq linear %d-bit codes of %d-vectors group %lld M=%lld%s%s", bits, d,
             (long long)group, (long long)M, rotate ? " rotated" : "", inexact ? " bf16" : "");
    double big = 0;
    for (int64_t i = 0; i < M * N; i++) big = fmax(big, fabs(want[i]));
    if (rc) failures++, printf("FAIL %s: rejected\n", name);
    else if (inexact) check(name, y, want, M * N, 0, 1e-2 * big); /* 8-bit mantissas: ~2e-3 */
    else check(name, y, want, M * N, 1e-5, 1e-5);
    free(codes); free(scales); free(cb); free(x); free(y); free(want); free(signs); free(xr);
}

/* int4 / int8 affine groups against a scalar dequantization. */
static void test_affine(int bits, int64_t group, int64_t M) {
    const int64_t N = 200, K = 192, stride = K * bits / 8, groups = K / group;
    uint8_t *codes = malloc((size_t)(N * stride));
    uint16_t *sc = malloc(2 * (size_t)(N * groups)), *bi = malloc(2 * (size_t)(N * groups));
    float *x = fill(M * K, 1), *y = fill(M * N, 0);
    double *want = calloc((size_t)(M * N), 8), mag = 0;
    for (int64_t i = 0; i < N * stride; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
    for (int64_t i = 0; i < N * groups; i++) {
        sc[i] = to_half(0.05f + 0.02f * frand());
        bi[i] = to_half(0.1f * frand() + 0.2f);
    }
    for (int64_t n = 0; n < N; n++)
        for (int64_t i = 0; i < K; i++) {
            int q = bits == 8 ? codes[n * stride + i] : (codes[n * stride + i / 2] >> (4 * (i % 2))) & 15;
            double w = q * half_ref(sc[n * groups + i / group]) + half_ref(bi[n * groups + i / group]);
            for (int64_t m = 0; m < M; m++) want[m * N + n] += w * x[m * K + i], mag += fabs(w * x[m * K + i]);
        }
    int rc = cn_affine_linear(x, M, K, codes, bits, sc, bi, group, N, NULL, y);
    /* int8 weights reach 15 and their products cancel: float32 sums of K of them err by
     * a few ulps of the terms' magnitude (mean sum |w x| per output), not of the result */
    mag /= (double)(M * N);
    char name[64];
    snprintf(name, sizeof name, "int%d linear group %lld M=%lld", bits, (long long)group, (long long)M);
    if (rc) failures++, printf("FAIL %s: rejected\n", name);
    else check(name, y, want, M * N, 1e-5, 1e-5 + 1e-7 * mag);
    free(codes); free(sc); free(bi); free(x); free(y); free(want);
}

/* Embedding rows of quantized tables against scalar decoding: int4/int8 affine
 * groups, and CQ rows brought back to the original space, w = s * H(w'). */
/* Original-space row of a rotated one: w = s * H_b(w'), H_b the orthonormal
 * Hadamard transform of each block (its own inverse), by the definition. */
static void unrotate_ref(const double *rot, const float *signs, int64_t D, int64_t block, double *want) {
    for (int64_t k = 0; k < D; k++) {
        const int64_t b0 = k / block * block;
        double acc = 0;
        for (int64_t j = b0; j < b0 + block; j++)
            acc += (__builtin_popcountll((unsigned long long)((k - b0) & (j - b0))) & 1 ? -1 : 1) * rot[j];
        want[k] = signs[k] * acc / sqrt((double)block);
    }
}

static void test_quant_embedding(void) {
    const int64_t V = 40, D = 128, group = 32, block = 64, n = 5;
    const int64_t ids[5] = {3, 0, 39, 3, 17};
    uint16_t *sc = malloc(2 * (size_t)(V * D / group)), *bi = malloc(2 * (size_t)(V * D / group));
    for (int64_t i = 0; i < V * D / group; i++) sc[i] = to_half(0.05f + 0.02f * frand()), bi[i] = to_half(0.1f * frand());
    float *out = fill(n * D, 0);
    double *want = calloc((size_t)(n * D), 8);
    for (int bits = 4; bits <= 8; bits += 4) {
        uint8_t *codes = malloc((size_t)(V * D * bits / 8));
        for (int64_t i = 0; i < V * D * bits / 8; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
        for (int64_t r = 0; r < n; r++)
            for (int64_t k = 0; k < D; k++) {
                const uint8_t *row = codes + ids[r] * D * bits / 8;
                int q = bits == 8 ? row[k] : (row[k / 2] >> (4 * (k % 2))) & 15;
                want[r * D + k] = q * half_ref(sc[ids[r] * (D / group) + k / group]) + half_ref(bi[ids[r] * (D / group) + k / group]);
            }
        int rc = cn_affine_embedding(codes, bits, sc, bi, group, V, D, ids, n, out);
        const int64_t bad = -1;
        int rc_bad = cn_affine_embedding(codes, bits, sc, bi, group, V, D, &bad, 1, out);
        char name[64];
        snprintf(name, sizeof name, "int%d embedding", bits);
        if (rc || rc_bad != -3) failures++, printf("FAIL %s: rc %d, bad id rc %d\n", name, rc, rc_bad);
        else check(name, out, want, n * D, 1e-6, 1e-6);
        free(codes);
    }
    /* CQ: 8-bit codes of 2-vectors */
    const int64_t stride = D / 2;
    uint8_t *codes = malloc((size_t)(V * stride));
    for (int64_t i = 0; i < V * stride; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
    float *cb = fill(512, 1), *signs = fill(D, 1);
    for (int64_t k = 0; k < D; k++) signs[k] = signs[k] < 0 ? -1.0f : 1.0f;
    for (int64_t r = 0; r < n; r++) {
        double rot[128];
        for (int64_t v = 0; v < D / 2; v++)
            for (int e = 0; e < 2; e++)
                rot[2 * v + e] = cb[2 * codes[ids[r] * stride + v] + e] * half_ref(sc[ids[r] * (D / group) + 2 * v / group]);
        unrotate_ref(rot, signs, D, block, want + r * D);
    }
    int rc = cn_cq_embedding(codes, stride, 8, 2, sc, group, cb, signs, block, V, D, ids, n, out);
    if (rc) failures++, printf("FAIL cq embedding: rc %d\n", rc);
    else check("cq embedding", out, want, n * D, 1e-5, 1e-6);
    free(codes); free(cb); free(signs); free(sc); free(bi); free(out); free(want);
}

/* Embedding rows of scalar-codebook CQ tables (the cq6 / cq5 tied heads: 6- or
 * 5-bit codes of single weights), against decoding the bit stream bit by bit. */
static void test_cq_scalar_embedding(int bits) {
    const int64_t V = 40, D = 192, group = 64, block = 64, n = 4, stride = D * bits / 8;
    const int64_t ids[4] = {39, 0, 7, 39};
    uint8_t *codes = malloc((size_t)(V * stride));
    uint16_t *sc = malloc(2 * (size_t)(V * D / group));
    float *cb = fill(1 << bits, 1), *signs = fill(D, 1), *out = fill(n * D, 0);
    double *want = calloc((size_t)(n * D), 8), rot[192];
    for (int64_t i = 0; i < V * stride; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
    for (int64_t i = 0; i < V * D / group; i++) sc[i] = to_half(0.5f + 0.25f * frand());
    for (int64_t k = 0; k < D; k++) signs[k] = signs[k] < 0 ? -1.0f : 1.0f;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t v = 0; v < D; v++) {
            uint32_t code = 0;
            for (int b = 0; b < bits; b++)
                code |= (uint32_t)((codes[ids[r] * stride + (v * bits + b) / 8] >> ((v * bits + b) % 8)) & 1) << b;
            rot[v] = cb[code] * half_ref(sc[ids[r] * (D / group) + v / group]);
        }
        unrotate_ref(rot, signs, D, block, want + r * D);
    }
    int rc = cn_cq_embedding(codes, stride, bits, 1, sc, group, cb, signs, block, V, D, ids, n, out);
    char name[64];
    snprintf(name, sizeof name, "cq embedding, %d-bit scalar codebook", bits);
    if (rc) failures++, printf("FAIL %s: rc %d\n", name, rc);
    else check(name, out, want, n * D, 1e-5, 1e-6);
    free(codes); free(sc); free(cb); free(signs); free(out); free(want);
}

/* CQ decode with int8 activations (cn_cq_linear_i8) against two references:
 * the same int8 arithmetic done here in double (x quantized per scale group,
 * the codebook per table; tight, it catches any layout slip), and the exact
 * product (loose: the two int8 roundings cost about 1e-2). */
static void test_cq_i8(int bits, int d, int64_t K, int64_t N, int64_t group, int64_t M, int rotate) {
    const int64_t nv = K / d, stride = (nv * bits + 7) / 8, block = 64, ng = K / group, E = 1 << bits;
    uint8_t *codes = malloc((size_t)(N * stride));
    uint16_t *scales = malloc(2 * (size_t)(N * ng));
    float *cb = fill(d * E, 1), *x = fill(M * K, 1), *y = fill(M * N, 0), *b = fill(N, 1);
    float *signs = malloc(sizeof(float) * (size_t)K), *xr = malloc(sizeof(float) * (size_t)(M * K));
    double *want = calloc((size_t)(M * N), 8), *exact = calloc((size_t)(M * N), 8);
    int8_t *cbq = malloc((size_t)(d * E));
    float amax = 0;
    for (int64_t i = 0; i < d * E; i++) cb[i] = (float)half_ref(to_half(cb[i])), amax = fmaxf(amax, fabsf(cb[i]));
    const float cbs = amax / (float)cn_cq_i8_cb_limit(bits, d); /* 63 for 4-bit scalars */
    for (int64_t c = 0; c < E; c++) /* planes: component e of entry c at e * E + c */
        for (int e = 0; e < d; e++) cbq[e * E + c] = (int8_t)lrintf(cb[d * c + e] / cbs);
    for (int64_t k = 0; k < K; k++) signs[k] = rotate && frand() < 0 ? -1.0f : 1.0f;
    for (int64_t m = 0; m < M; m++) /* the rotation in float, as the kernel does it */
        for (int64_t k = 0; k < K; k++) {
            double acc = 0;
            const int64_t b0 = k / block * block;
            for (int64_t j = b0; j < b0 + block && rotate; j++)
                acc += (__builtin_popcountll((unsigned long long)((k - b0) & (j - b0))) & 1 ? -1 : 1) *
                       (double)x[m * K + j] * signs[j];
            xr[m * K + k] = rotate ? (float)(acc / sqrt((double)block)) : x[m * K + k];
        }
    for (int64_t i = 0; i < N * stride; i++) codes[i] = (uint8_t)(frand() * 128 + 128);
    for (int64_t i = 0; i < N * ng; i++) scales[i] = to_half(0.5f + 0.25f * frand());
    for (int64_t m = 0; m < M; m++)
        for (int64_t g = 0; g < ng; g++) {
            const float *xg = xr + m * K + g * group;
            float xmax = 0;
            for (int64_t i = 0; i < group; i++) xmax = fmaxf(xmax, fabsf(xg[i]));
            const float inv = xmax > 0 ? 127.0f / xmax : 0.0f;
            for (int64_t n = 0; n < N; n++) {
                double dot = 0, ex = 0;
                for (int64_t i = 0; i < group; i++) {
                    const int64_t v = (g * group + i) / d, bit0 = v * bits;
                    uint32_t code = 0;
                    for (int bb = 0; bb < bits; bb++)
                        code |= (uint32_t)((codes[n * stride + (bit0 + bb) / 8] >> ((bit0 + bb) % 8)) & 1) << bb;
                    dot += (double)cbq[(i % d) * E + code] * nearbyintf(xg[i] * inv);
                    ex += (double)cb[d * code + i % d] * xg[i];
                }
                const double s = half_ref(scales[n * ng + g]);
                want[m * N + n] += s * dot * (double)(xmax / 127.0f) * cbs;
                exact[m * N + n] += s * ex;
            }
        }
    double big = 0;
    for (int64_t i = 0; i < M * N; i++) {
        want[i] += b[i % N], exact[i] += b[i % N];
        big = fmax(big, fabs(exact[i]));
    }
    int rc = cn_cq_linear_i8(x, M, K, codes, stride, bits, d, scales, group, cbq, cbs, rotate ? signs : NULL,
                             block, N, b, y);
    char name[96];
    snprintf(name, sizeof name, "cq int8-act %d-bit %d-vectors K=%lld group %lld M=%lld%s", bits, d, (long long)K,
             (long long)group, (long long)M, rotate ? " rotated" : "");
    if (rc) failures++, printf("FAIL %s: rc %d\n", name, rc);
    else {
        check(name, y, want, M * N, 0, 1e-3 * big);
        snprintf(name + strlen(name), sizeof name - strlen(name), " vs exact");
        check(name, y, exact, M * N, 0, 3e-2 * big);
    }
    free(codes); free(scales); free(cb); free(x); free(y); free(b); free(signs); free(xr); free(want); free(exact);
    free(cbq);
}

/* Fused calls (fused.c) against one call per weight: the same kernels over the
 * same rotated (and, for int8 activations, quantized) x; the gated form
 * against act(gate) * up of those outputs.  Three weights share one
 * sign vector, as q/k/v quantized with one seed do. */
static void test_fused(int bits, int d, int64_t M, int i8) {
    enum { n = 3 };
    const int64_t K = 256, group = 128, block = 64, nv = K / d, stride = (nv * bits + 7) / 8, E = 1 << bits;
    const int64_t Ns[n] = {96, 40, 40};
    float *x = fill(M * K, 1), *signs = malloc(sizeof(float) * (size_t)K), *y = fill(M * 176, 0);
    float *sep = fill(M * 176, 0), *gated = fill(M * 40, 0);
    double *want = malloc(sizeof(double) * (size_t)(M * 176));
    for (int64_t k = 0; k < K; k++) signs[k] = frand() < 0 ? -1.0f : 1.0f;
    cn_cq_weight w[n];
    for (int i = 0; i < n; i++) {
        uint8_t *codes = malloc((size_t)(Ns[i] * stride));
        uint16_t *scales = malloc(2 * (size_t)(Ns[i] * K / group));
        float *cb = fill(d * E, 1), amax = 0;
        int8_t *cbq = malloc((size_t)(d * E));
        for (int64_t j = 0; j < Ns[i] * stride; j++) codes[j] = (uint8_t)(frand() * 128 + 128);
        for (int64_t j = 0; j < Ns[i] * K / group; j++) scales[j] = to_half(0.5f + 0.25f * frand());
        for (int64_t j = 0; j < d * E; j++) cb[j] = (float)half_ref(to_half(cb[j])), amax = fmaxf(amax, fabsf(cb[j]));
        for (int64_t c = 0; c < E; c++)
            for (int e = 0; e < d; e++) cbq[e * E + c] = (int8_t)lrintf(cb[d * c + e] / (amax / 127.0f));
        w[i] = (cn_cq_weight){codes, stride, bits, d, scales, group, cb, i8 ? cbq : NULL, amax / 127.0f, signs,
                              block, Ns[i], i == 2 ? x : NULL}; /* any n floats make a bias */
    }
    int rc = 0;
    for (int i = 0, at = 0; i < n; at += (int)(M * Ns[i]), i++)
        rc |= i8 ? cn_cq_linear_i8(x, M, K, w[i].codes, stride, bits, d, w[i].scales, group, w[i].cb_q8,
                                   w[i].cb_scale, signs, block, Ns[i], w[i].bias, sep + at)
                 : cn_cq_linear(x, M, K, w[i].codes, stride, bits, d, w[i].scales, group, w[i].codebook, signs,
                                block, Ns[i], w[i].bias, sep + at, 0);
    rc |= cn_cq_linear_multi(x, M, K, n, w, y, NULL, 0, 0, 0, i8, -1);
    rc |= cn_cq_linear_multi(x, M, K, 2, w + 1, gated, NULL, 0, 0, 0, i8, 0);
    char name[96];
    snprintf(name, sizeof name, "fused cq %d-bit %d-vectors M=%lld%s", bits, d, (long long)M, i8 ? " int8-act" : "");
    if (rc) {
        failures++, printf("FAIL %s: rc %d\n", name, rc);
    } else {
        for (int64_t i = 0; i < M * 176; i++) want[i] = sep[i];
        /* int8 rows are computed one by one: the same bits.  Exact decode runs rows four
         * at a time from where a thread's chunk starts, so chunks cut elsewhere round
         * differently in the last place. */
        check(name, y, want, M * 176, i8 ? 0 : 1e-5, i8 ? 0 : 1e-6);
        const float *g = sep + M * 96, *u = g + M * 40;
        for (int64_t i = 0; i < M * 40; i++) want[i] = g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        snprintf(name + strlen(name), sizeof name - strlen(name), " gated silu");
        check(name, gated, want, M * 40, 1e-5, 1e-6);
    }
    for (int i = 0; i < n; i++) {
        free((void *)w[i].codes); free((void *)w[i].scales); free((void *)w[i].codebook);
        free((void *)(i8 ? w[i].cb_q8 : NULL));
    }
    free(x); free(signs); free(y); free(sep); free(gated); free(want);
}

/* Float weights of three types in one call against one cn_linear each. */
static void test_linear_multi(int64_t M) {
    enum { n = 3 };
    const int64_t K = 200, Ns[n] = {70, 33, 33};
    float *x = fill(M * K, 1), *y = fill(M * 136, 0), *sep = fill(M * 136, 0), *g = fill(M * 33, 0);
    double *want = malloc(sizeof(double) * (size_t)(M * 136));
    cn_float_weight w[n];
    void *store[n];
    for (int i = 0; i < n; i++) { /* wtype i: float32, float16, bfloat16 */
        float *f = fill(Ns[i] * K, 1);
        if (i == 0) {
            store[i] = f;
        } else {
            uint16_t *h = malloc(2 * (size_t)(Ns[i] * K));
            for (int64_t j = 0; j < Ns[i] * K; j++) {
                uint32_t b;
                memcpy(&b, &f[j], 4);
                h[j] = i == 1 ? to_half(f[j]) : (uint16_t)(b >> 16);
            }
            free(f);
            store[i] = h;
        }
        w[i] = (cn_float_weight){store[i], i, Ns[i], i == 1 ? x : NULL};
    }
    for (int i = 0, at = 0; i < n; at += (int)(M * Ns[i]), i++) cn_linear(x, M, K, w[i].w, i, Ns[i], w[i].bias, sep + at);
    int rc = cn_linear_multi(x, M, K, n, w, y, NULL, 0, 0, -1) | cn_linear_multi(x, M, K, 2, w + 1, g, NULL, 0, 0, 2);
    char name[64];
    snprintf(name, sizeof name, "fused float linear M=%lld", (long long)M);
    if (rc) {
        failures++, printf("FAIL %s: rc %d\n", name, rc);
    } else {
        for (int64_t i = 0; i < M * 136; i++) want[i] = sep[i];
        check(name, y, want, M * 136, 0, 0); /* the same row loops over the same rows */
        const float *gt = sep + M * 70, *up = gt + M * 33;
        for (int64_t i = 0; i < M * 33; i++) {
            const double t = gt[i];
            want[i] = 0.5 * t * (1 + tanh(0.7978845608028654 * (t + 0.044715 * t * t * t))) * up[i];
        }
        snprintf(name + strlen(name), sizeof name - strlen(name), " gated gelu_tanh");
        check(name, g, want, M * 33, 1e-5, 1e-6);
    }
    for (int i = 0; i < n; i++) free(store[i]);
    free(x); free(y); free(sep); free(g); free(want);
}

/* QK-norm and RoPE of queries and keys in one call, against the scalar maths. */
static void test_rope_qk(int normed, int unit_offset) {
    const int64_t BHq = 6, BHk = 2, L = 3, hd = 16, half = 6;
    const float eps = 1e-6f;
    float *q = fill(BHq * L * hd, 2), *k = fill(BHk * L * hd, 2), *qo = fill(BHq * L * hd, 0), *ko = fill(BHk * L * hd, 0);
    float *inv = fill(half, 0), *qn = fill(hd, 1), *kn = fill(hd, 1);
    double pos[3] = {4, 5, 900}, *want = malloc(sizeof(double) * (size_t)(BHq * L * hd));
    for (int64_t i = 0; i < half; i++) inv[i] = (float)pow(10000.0, -(double)i / (double)half);
    int rc = cn_rope_qk(q, k, qo, ko, BHq, BHk, L, hd, pos, inv, half, normed ? qn : NULL, normed ? kn : NULL, eps,
                        unit_offset);
    for (int t = 0; t < 2; t++) {
        const float *x = t ? k : q, *nw = t ? kn : qn, *got = t ? ko : qo;
        const int64_t rows = (t ? BHk : BHq) * L;
        for (int64_t r = 0; r < rows; r++) {
            double v[16], ss = 0;
            for (int64_t i = 0; i < hd; i++) ss += (double)x[r * hd + i] * x[r * hd + i];
            for (int64_t i = 0; i < hd; i++)
                v[i] = normed ? x[r * hd + i] / sqrt(ss / hd + eps) * (nw[i] + (unit_offset ? 1.0 : 0.0)) : x[r * hd + i];
            for (int64_t i = 0; i < hd; i++) want[r * hd + i] = v[i];
            for (int64_t i = 0; i < half; i++) {
                const double a = pos[r % L] * inv[i], c = cos(a), s = sin(a);
                want[r * hd + i] = v[i] * c - v[half + i] * s;
                want[r * hd + half + i] = v[half + i] * c + v[i] * s;
            }
        }
        char name[64];
        snprintf(name, sizeof name, "rope_qk %s%s%s", t ? "keys" : "queries", normed ? " normed" : "",
                 unit_offset ? " (unit offset)" : "");
        if (rc) failures++, printf("FAIL %s: rc %d\n", name, rc);
        else check(name, got, want, rows * hd, 1e-5, 1e-5);
    }
    free(q); free(k); free(qo); free(ko); free(inv); free(qn); free(kn); free(want);
}

/* The nearest float16 to x, ties to the even pattern, found by bisecting the
 * ordered positive patterns with half_ref: independent of any bit trick. */
static uint16_t half_nearest(float x) {
    if (isnan(x)) return 0x7e00;
    const uint16_t s = signbit(x) ? 0x8000 : 0;
    const double a = fabs((double)x);
    if (a >= 65520.0) return s | 0x7c00; /* past the largest half by half a step: inf */
    uint16_t lo = 0, hi = 0x7bff; /* largest pattern with value <= a */
    while (lo < hi) {
        const uint16_t mid = (uint16_t)((lo + hi + 1) / 2);
        if (half_ref(mid) <= a) lo = mid; else hi = mid - 1;
    }
    const double below = half_ref(lo), above = half_ref((uint16_t)(lo + 1));
    if (a - below < above - a || (a - below == above - a && !(lo & 1))) return s | lo;
    return s | (uint16_t)(lo + 1);
}

/* New keys and values stored in a float16 cache (rounded to nearest even:
 * subnormal halves, ties, overflow) and a float32 one, then attention over
 * the cache against cn_attention on the same rows. */
static void test_cached_attention(int64_t d) {
    const int64_t B = 1, Hq = 4, Hkv = 2, L = 3, max_len = 9, off = 4, n = B * Hkv * L * d;
    float *q = fill(B * Hq * L * d, 1), *k = fill(n, 1), *v = fill(n, 1), *o = fill(B * Hq * L * d, 0);
    float *o2 = fill(B * Hq * L * d, 0);
    for (int64_t i = 0; i < n; i++) { /* spread over every range a half has, and past it */
        k[i] = ldexpf(k[i], (int)(i % 48) - 30);
        v[i] = i % 7 == 0 ? (float)(1 + 2 * (i % 5)) * ldexpf(1.0f, -25) : v[i] * 70000.0f; /* ties, overflow */
    }
    uint16_t *ck = calloc((size_t)(B * Hkv * max_len * d), 2), *cv = calloc((size_t)(B * Hkv * max_len * d), 2);
    int rc = cn_cached_attention(q, k, v, ck, cv, 1, o, B, Hq, Hkv, L, d, max_len, off, 0.5f, -1, 0, 0);
    int bad = rc != 0;
    for (int64_t bh = 0; bh < B * Hkv; bh++)
        for (int64_t r = 0; r < max_len; r++)
            for (int64_t i = 0; i < d; i++) {
                const int64_t at = (bh * max_len + r) * d + i, src = (bh * L + r - off) * d + i;
                const int fresh = r >= off && r < off + L;
                bad += ck[at] != (fresh ? half_nearest(k[src]) : 0) || cv[at] != (fresh ? half_nearest(v[src]) : 0);
            }
    cn_attention(q, ck, cv, 1, o2, B, Hq, Hkv, L, off + L, d, 0.5f, off, 1, -1, 0, NULL, 0, 0, 0, 0,
                 Hkv * max_len * d, max_len * d);
    for (int64_t i = 0; i < B * Hq * L * d; i++) bad += o[i] != o2[i] && !(isnan(o[i]) && isnan(o2[i]));
    failures += bad != 0;
    printf("%s cached attention, float16 cache, d=%lld (%d mismatches)\n", bad ? "FAIL" : "ok  ", (long long)d, bad);
    free(q); free(k); free(v); free(o); free(o2); free(ck); free(cv);
}

/* cn_decoder_block against the chain of separate calls it replaces (each checked
 * against a scalar reference above): the same kernels in the same order, so the
 * output and the K/V stored in the cache must be the same bits.  kind 0: CQ4
 * weights (i8: int8-activation decode), kind 1: float16 weights. */
static void test_block(int kind, int i8, int qk, int kvtype) {
    enum { D = 256, F = 384, Hq = 4, Hkv = 2, hd = 64, max_len = 16, off = 5 };
    const int64_t Ns[7] = {Hq * hd, Hkv * hd, Hkv * hd, D, F, F, D}, Ks[7] = {D, D, D, Hq * hd, D, D, F};
    const int bits = 8, d = 2;
    const int64_t group = 64, rot = 64, E = 1 << bits;
    cn_block b;
    memset(&b, 0, sizeof b);
    b.kind = kind, b.act = 0, b.D = D, b.F = F, b.Hq = Hq, b.Hkv = Hkv, b.d = hd, b.half = hd / 2, b.window = -1;
    b.eps = 1e-6f, b.scale = 0.125f;
    float *an = fill(D, 1), *mn = fill(D, 1), *qn = fill(hd, 1), *kn = fill(hd, 1), *inv = fill(hd / 2, 0);
    for (int i = 0; i < hd / 2; i++) inv[i] = (float)pow(10000.0, -2.0 * i / hd);
    b.attn_norm = an, b.mlp_norm = mn, b.q_norm = qk ? qn : NULL, b.k_norm = qk ? kn : NULL, b.inv_freq = inv;
    float *signs[2] = {fill(D, 1), fill(F, 1)}; /* one sign vector per input size: one seed */
    for (int j = 0; j < 2; j++)
        for (int64_t k = 0; k < (j ? F : D); k++) signs[j][k] = signs[j][k] < 0 ? -1.0f : 1.0f;
    for (int i = 0; i < 7; i++) {
        const int64_t N = Ns[i], K = Ks[i], stride = K / d;
        if (kind == 1) {
            uint16_t *h = malloc(2 * (size_t)(N * K));
            for (int64_t j = 0; j < N * K; j++) h[j] = to_half(frand() * 0.1f);
            b.fw[i] = (cn_float_weight){h, 1, N, i == 6 ? mn : NULL}; /* any D floats make a bias */
            continue;
        }
        uint8_t *codes = malloc((size_t)(N * stride));
        uint16_t *scales = malloc(2 * (size_t)(N * K / group));
        float *cb = fill(d * E, 1), amax = 0;
        int8_t *cbq = malloc((size_t)(d * E));
        for (int64_t j = 0; j < N * stride; j++) codes[j] = (uint8_t)(frand() * 128 + 128);
        for (int64_t j = 0; j < N * K / group; j++) scales[j] = to_half(0.05f + 0.02f * frand());
        for (int64_t j = 0; j < d * E; j++) cb[j] = (float)half_ref(to_half(cb[j])), amax = fmaxf(amax, fabsf(cb[j]));
        for (int64_t c = 0; c < E; c++)
            for (int e = 0; e < d; e++) cbq[e * E + c] = (int8_t)lrintf(cb[d * c + e] / (amax / 127.0f));
        b.cq[i] = (cn_cq_weight){codes, stride, bits, d, scales, group, cb, i8 ? cbq : NULL, amax / 127.0f,
                                 signs[K == F], rot, N, i == 6 ? mn : NULL};
    }
    const size_t es = kvtype ? 2 : 4, cache = (size_t)(Hkv * max_len * hd) * es;
    char *ck = calloc(cache, 1), *cv = calloc(cache, 1), *ck2 = malloc(cache), *cv2 = malloc(cache);
    for (int64_t j = 0; j < Hkv * max_len * hd; j++) { /* earlier positions (and later: never read) */
        const uint16_t hk = to_half(frand()), hv = to_half(frand());
        if (kvtype) {
            ((uint16_t *)(void *)ck)[j] = hk, ((uint16_t *)(void *)cv)[j] = hv;
        } else {
            ((float *)(void *)ck)[j] = (float)half_ref(hk), ((float *)(void *)cv)[j] = (float)half_ref(hv);
        }
    }
    memcpy(ck2, ck, cache), memcpy(cv2, cv, cache);
    float *x = fill(D, 1), *out = fill(D, 0), *want = fill(D, 0);
    float *qkv = fill(Hq * hd + 2 * Hkv * hd, 0), *qr = fill(Hq * hd, 0), *kr = fill(Hkv * hd, 0);
    float *att = fill(Hq * hd, 0), *proj = fill(D, 0), *g = fill(F, 0);
    /* Half the cases with the phase timer on: it may not change a bit. */
    cn_block_profile(qk);
    int rc = cn_decoder_block(&b, x, out, ck, cv, kvtype, max_len, off);
    int64_t ns[6], bytes[6], want_qkv = 0;
    const int64_t calls = cn_block_profile_read(ns, bytes);
    cn_block_profile(0);
    for (int i = 0; i < 3; i++) want_qkv += kind ? 2 * Ns[i] * Ks[i] : Ns[i] * (Ks[i] / d + 2 * Ks[i] / group);
    int timed = !qk || (calls == 1 && bytes[0] == want_qkv && bytes[1] == 0 && bytes[2] == 0);
    for (int p = 0; qk && p < 6; p++) timed = timed && ns[p] > 0;
    /* the chain, as the Python ops run it */
    const double pos = off;
    int rc2 = kind ? cn_linear_multi(x, 1, D, 3, b.fw, qkv, an, b.eps, 0, -1)
                   : cn_cq_linear_multi(x, 1, D, 3, b.cq, qkv, an, b.eps, 0, 0, 1, -1);
    rc2 |= cn_rope_qk(qkv, qkv + Hq * hd, qr, kr, Hq, Hkv, 1, hd, &pos, inv, hd / 2, b.q_norm, b.k_norm, b.eps, 0);
    rc2 |= cn_cached_attention(qr, kr, qkv + (Hq + Hkv) * hd, ck2, cv2, kvtype, att, 1, Hq, Hkv, 1, hd, max_len, off,
                               b.scale, -1, 0, 0);
    for (int step = 0; step < 2; step++) {
        const int i = step ? 6 : 3;
        const float *in = step ? g : att;
        const cn_cq_weight *w = &b.cq[i];
        if (kind) cn_linear(in, 1, Ks[i], b.fw[i].w, 1, Ns[i], b.fw[i].bias, proj);
        else if (i8) rc2 |= cn_cq_linear_i8(in, 1, Ks[i], w->codes, w->stride, bits, d, w->scales, group, w->cb_q8,
                                           w->cb_scale, w->signs, rot, Ns[i], w->bias, proj);
        else rc2 |= cn_cq_linear(in, 1, Ks[i], w->codes, w->stride, bits, d, w->scales, group, w->codebook, w->signs,
                                 rot, Ns[i], w->bias, proj, 0);
        if (step) {
            for (int j = 0; j < D; j++) want[j] += proj[j];
        } else {
            for (int j = 0; j < D; j++) want[j] = x[j] + proj[j];
            rc2 |= kind ? cn_linear_multi(want, 1, D, 2, b.fw + 4, g, mn, b.eps, 0, 0)
                        : cn_cq_linear_multi(want, 1, D, 2, b.cq + 4, g, mn, b.eps, 0, 0, 1, 0);
        }
    }
    int bad = rc != 0 || rc2 != 0 || memcmp(ck, ck2, cache) || memcmp(cv, cv2, cache) || !timed;
    for (int j = 0; j < D; j++) bad += out[j] != want[j] || !isfinite(out[j]);
    /* what it must refuse: a position past the cache, weights that do not make the block */
    bad += cn_decoder_block(&b, x, out, ck, cv, kvtype, max_len, max_len) != -1;
    b.F = F + 1;
    bad += cn_decoder_block(&b, x, out, ck, cv, kvtype, max_len, off) != -1;
    failures += bad != 0;
    printf("%s decoder block %s%s%s, %s cache (%d mismatches)\n", bad ? "FAIL" : "ok  ", kind ? "float16" : "cq4",
           i8 ? " int8-act" : "", qk ? " qk-norm" : "", kvtype ? "float16" : "float32", bad);
}

/* runtime.c's cn_parallel_for (internal: declared here as neon_common.h does).
 * Every index must run exactly once, however the threads split and steal the
 * range; ranges starting at 0 are slowed down so that the others run out of
 * work and take over the rest of that run. */
typedef void (*cn_range_fn)(const void *ctx, int64_t begin, int64_t end);
void cn_parallel_for(int64_t n, int64_t work, cn_range_fn fn, const void *ctx);

static void count_range(const void *ctx, int64_t begin, int64_t end) {
    int *hits = (int *)ctx;
    if (begin == 0)
        for (volatile int spin = 0; spin < 200000; spin++) {
        }
    for (int64_t i = begin; i < end; i++) __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

static void test_parallel_for(void) {
    static const int64_t sizes[] = {1, 2, 3, 5, 47, 48, 49, 191, 1000, 100003};
    int bad = 0, runs = 0;
    for (size_t c = 0; c < sizeof sizes / sizeof *sizes; c++)
        for (int rep = 0; rep < 50; rep++, runs++) {
            const int64_t n = sizes[c];
            int *hits = calloc((size_t)n, sizeof(int));
            cn_parallel_for(n, 1 << 30, count_range, hits);
            for (int64_t i = 0; i < n; i++) bad += hits[i] != 1;
            free(hits);
        }
    printf("%s parallel_for: every index once over %d runs (%d misses)\n", bad ? "FAIL" : "ok  ", runs, bad);
    failures += bad != 0;
}

int main(void) {
    printf("native NEON: %s\n", cn_native_neon() ? "yes" : "no (SIMDe)");
    printf("threads: %s\n", (const char *[]){"none", "OpenMP", "thread pool"}[cn_threading()]);
#if defined(__ARM_FEATURE_DOTPROD)
    printf("dot product instructions: yes\n"); /* cq_i8.c's vdotq_s32 path */
#else
    printf("dot product instructions: no\n");
#endif
    cn_set_threads(3); /* an odd split; checks above CN_PAR_MIN_WORK run threaded */
    test_parallel_for();
    for (int wt = 0; wt < 3; wt++) {
        test_linear(1, 301, 37, wt);
        test_linear(1, 1024, 67, wt);
        test_linear(6, 517, 13, wt);
    }
    test_f16_all_patterns();
    test_norms();
    test_rope();
    test_activations();
    test_softmax_hadamard();
    test_attention(1, 50, 49, -1, 0, 0);
    test_attention(7, 19, 12, 5, 30.0f, 0);
    test_attention(3, 41, 38, -1, 0, 1);
    test_attention_heads(1, 103, 102, -1, 0, 1, 16, 8, 128); /* Qwen3-0.6B's decode shape, f16 cache */
    test_attention_heads(1, 70, 69, 33, 0, 1, 32, 8, 64);    /* Llama-3.2-1B's, sliding window */
    test_attention_heads(1, 45, 44, -1, 20.0f, 0, 12, 2, 80); /* 6 heads a group, f32, softcap */
    test_attention_heads(1, 6, 5, -1, 0, 1, 8, 1, 48);        /* 8 heads a group, fewer keys than 4 + tail */
    test_cq(8, 2, 1, 64, 0);
    test_cq(6, 2, 1, 64, 0);
    test_cq(8, 4, 5, 64, 0);
    test_cq(5, 2, 3, 64, 0); /* a layout without a specialised kernel */
    test_cq(6, 1, 1, 64, 0); /* scalar codebooks: the cq6 / cq5 heads */
    test_cq(5, 1, 1, 128, 0);
    test_cq(6, 1, 7, 64, 1);
    test_cq(5, 1, 37, 64, 1);
    test_cq(5, 1, 1, 128, 1);
    test_cq(4, 1, 1, 64, 0); /* CQ4 since session 12: 4-bit scalars (arm64: the byte-plane lookup) */
    test_cq(4, 1, 1, 128, 1);
    test_cq(4, 1, 6, 64, 1);
    test_affine(4, 64, 1);
    test_affine(4, 32, 3);
    test_affine(8, 64, 1);
    test_affine(8, 6, 2);
    test_quant_embedding();
    test_cq_scalar_embedding(6);
    test_cq_scalar_embedding(5);
    /* the input rotation done inside the kernel, decode and prefill tiles with edges */
    test_cq(8, 2, 1, 128, 1);
    test_cq(8, 2, 37, 64, 1);
    test_cq(8, 4, 5, 64, 1);
    /* bfloat16 prefill products where the CPU has them (exact elsewhere) */
    cq_bf16 = 1;
    test_cq(8, 2, 37, 64, 1);
    test_cq(6, 2, 9, 128, 1);
    test_cq(8, 4, 5, 64, 1);
    test_cq(8, 2, 1, 128, 1); /* decode ignores the flag */
    cq_bf16 = 0;
    /* int8 activations: groups of whole 64-code chunks, partial chunks, several rows */
    test_cq_i8(8, 2, 512, 67, 128, 1, 1);
    test_cq_i8(6, 2, 512, 67, 128, 1, 1);
    test_cq_i8(8, 2, 320, 37, 80, 1, 1);
    test_cq_i8(6, 2, 576, 29, 96, 2, 1);
    test_cq_i8(8, 2, 960, 45, 120, 1, 0);
    test_cq_i8(6, 2, 256, 33, 256, 1, 1);
    test_cq_i8(8, 4, 512, 67, 128, 1, 1); /* CQ2: half chunks */
    test_cq_i8(8, 4, 512, 21, 256, 1, 1);
    test_cq_i8(8, 4, 320, 19, 80, 2, 1);
    test_cq_i8(6, 1, 512, 67, 128, 1, 1); /* scalar codebooks (cq6 / cq5 heads): two chunks per group */
    test_cq_i8(5, 1, 512, 67, 128, 1, 1);
    test_cq_i8(6, 1, 320, 37, 80, 2, 1); /* 80 codes: a whole chunk and a partial one */
    test_cq_i8(5, 1, 960, 45, 120, 1, 0); /* 5-bit partial chunk of 56 codes (7 byte groups) */
    test_cq_i8(6, 1, 576, 29, 96, 1, 1);
    test_cq_i8(5, 1, 256, 33, 256, 1, 1);
    test_cq_i8(4, 1, 512, 67, 128, 1, 1); /* CQ4 since session 12: 4-bit scalars, x as 2-vectors */
    test_cq_i8(4, 1, 320, 37, 80, 2, 1);  /* 40 code bytes: a step of 16 and a short one of 8 */
    test_cq_i8(4, 1, 576, 29, 96, 1, 1);
    test_cq_i8(4, 1, 960, 45, 120, 1, 0);
    test_cq_i8(4, 1, 256, 33, 256, 1, 1); /* two 64-byte chunks per group */
    /* fused calls: exact decode in one region, prefill, int8-activation decode */
    test_fused(8, 2, 1, 0);
    test_fused(6, 2, 1, 0);
    test_fused(8, 4, 4, 0);
    test_fused(8, 2, 1, 1);
    test_fused(6, 2, 1, 1);
    test_fused(6, 1, 1, 1);
    test_fused(5, 1, 1, 0);
    test_linear_multi(1);
    test_linear_multi(5);
    test_cached_attention(3);  /* the scalar rounding */
    test_cached_attention(16); /* the vector convert */
    test_rope_qk(0, 0);
    test_rope_qk(1, 0);
    test_rope_qk(1, 1);
    test_block(0, 0, 1, 1);
    test_block(0, 1, 1, 1);
    test_block(0, 1, 0, 0);
    test_block(1, 0, 1, 1);
    {
        const uint8_t c = 0; const uint16_t sc = 0; const int8_t q = 0; float out = 0, xx = 0;
        const int rc = cn_cq_linear_i8(&xx, 1, 64, &c, 64, 8, 1, &sc, 64, &q, 1.0f, NULL, 64, 1, NULL, &out);
        failures += rc != -1;
        printf("%s cq int8-act rejects 8-bit scalar codebooks (rc %d)\n", rc == -1 ? "ok  " : "FAIL", rc);
        /* 5-bit codes need groups of whole bytes (runs of eight codes): 36 is not */
        const int rc5 = cn_cq_linear_i8(&xx, 1, 72, &c, 45, 5, 1, &sc, 36, &q, 1.0f, NULL, 8, 1, NULL, &out);
        failures += rc5 != -1;
        printf("%s cq int8-act rejects 5-bit groups of 36 (rc %d)\n", rc5 == -1 ? "ok  " : "FAIL", rc5);
    }
    printf("%d failure(s)\n", failures);
    return failures;
}
