/* bfloat16 prefill on AMX tiles (Sapphire Rapids and later Xeons).
 *
 * On such a core the AVX-512 bfloat16 tile of gemm_avx512.c (vdpbf16ps, 8 rows x 32
 * columns) took 70% of a Qwen3-0.6B prefill and ran at ~96 GFLOP/s per core: llama.cpp's
 * int8 kernels prefilled 1.5x faster.  One TDPBF16PS multiplies a 16 x 32 bfloat16 tile of
 * x by a 32 x 16 tile of weights into 16 x 16 float32 sums, 8192 products where vdpbf16ps
 * does 32, with the same arithmetic: bfloat16 pairs, float32 sums (the order of the sums
 * differs, inside the path's 2e-3).
 *
 * gemm_avx512.c's packed panel is already the weight tile's layout (AMX calls it VNNI):
 * panel16[k / 2][32] holds inputs k and k + 1 of one weight row in one 32-bit word, so a
 * tile is 16 such rows of 16 words, read at a stride of 128 bytes.  x's tile is 16 rows of
 * 32 bfloat16 inputs straight from xb.  Each 32 x 32 block of y uses all eight tiles: four
 * sums (tiles 0-3), two of x (4, 5) and two of weights (6, 7), each 16 rows of 64 bytes.
 *
 * Linux hands AMX state to a process only on request (arch_prctl ARCH_REQ_XCOMP_PERM,
 * kernel 5.16+); without it the first tile instruction faults.  cn_amx_begin asks once per
 * process and loads the tile layout in the calling thread (each pool thread does); it
 * returns 0 (use the AVX-512 tile) when the build has no AMX, the kernel refuses, or
 * CACTUS_AMX=0 is set. */
#include "neon_common.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512F__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

static int amx_state; /* 0 not asked yet, 1 granted, -1 not usable */

int cn_gemm_amx_available(void) {
    int s = __atomic_load_n(&amx_state, __ATOMIC_ACQUIRE);
    if (s == 0) {
        const char *env = getenv("CACTUS_AMX");
        const int off = env && (env[0] == '0' || env[0] == 'n' || env[0] == 'f');
        s = !off && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 ? 1 : -1;
        __atomic_store_n(&amx_state, s, __ATOMIC_RELEASE);
    }
    return s > 0;
}

/* Every tile is 16 rows of 64 bytes.  A constant in memory, not a local: GCC 12's
 * _tile_loadconfig declares only 8 bytes of its operand read, and a local filled just before
 * it lost the rest of its stores (a #GP on ldtilecfg at -O3). */
static const tile_config layout __attribute__((aligned(64))) = {
    .palette = 1,
    .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
    .rows = {16, 16, 16, 16, 16, 16, 16, 16},
};

int cn_amx_begin(void) {
    if (!cn_gemm_amx_available()) return 0;
    _tile_loadconfig(&layout);
    return 1;
}

void cn_amx_end(void) { _tile_release(); }

/* y[m .. m + 16 * blocks, n0 .. n0 + 32) (+)= x[.., k0 .. k0 + kc) @ panel (blocks 1 or 2 of
 * 16 rows). The sums start from y itself when accumulating, through a 32 x 32 buffer when the
 * panel's last columns lie past N. */
static void block(const uint16_t *xb, int64_t K, int64_t k0, int64_t kc, const uint32_t *panel16, float *y,
                  int64_t N, int64_t n0, int64_t m, int blocks, int accumulate) {
    const int64_t cols = CN_MIN(32, N - n0);
    float buf[32 * 32] __attribute__((aligned(64)));
    float *c = cols == 32 ? y + m * N + n0 : buf;
    const int64_t ldc = cols == 32 ? N : 32;
    if (cols < 32) {
        memset(buf, 0, sizeof buf);
        if (accumulate)
            for (int i = 0; i < 16 * blocks; i++) memcpy(buf + 32 * i, y + (m + i) * N + n0, sizeof(float) * (size_t)cols);
    }
    if (accumulate) {
        _tile_loadd(0, c, 4 * ldc);
        _tile_loadd(1, c + 16, 4 * ldc);
        if (blocks == 2) {
            _tile_loadd(2, c + 16 * ldc, 4 * ldc);
            _tile_loadd(3, c + 16 * ldc + 16, 4 * ldc);
        }
    } else {
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
    }
    const uint16_t *x = xb + m * K + k0;
    for (int64_t k = 0; k < kc; k += 32) {
        _tile_loadd(4, x + k, 2 * K);
        _tile_loadd(6, panel16 + k / 2 * 32, 128);
        _tile_loadd(7, panel16 + k / 2 * 32 + 16, 128);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        if (blocks == 2) {
            _tile_loadd(5, x + 16 * K + k, 2 * K);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
        }
    }
    _tile_stored(0, c, 4 * ldc);
    _tile_stored(1, c + 16, 4 * ldc);
    if (blocks == 2) {
        _tile_stored(2, c + 16 * ldc, 4 * ldc);
        _tile_stored(3, c + 16 * ldc + 16, 4 * ldc);
    }
    if (cols < 32)
        for (int i = 0; i < 16 * blocks; i++) memcpy(y + (m + i) * N + n0, buf + 32 * i, sizeof(float) * (size_t)cols);
}

int64_t cn_amx_rows(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc, const uint32_t *panel16,
                    float *y, int64_t N, int64_t n0, int accumulate) {
    if (kc % 32) return 0;
    int64_t m = 0;
    for (; m + 32 <= M; m += 32) block(xb, K, k0, kc, panel16, y, N, n0, m, 2, accumulate);
    if (m + 16 <= M) {
        block(xb, K, k0, kc, panel16, y, N, n0, m, 1, accumulate);
        m += 16;
    }
    return m;
}

#else

int cn_gemm_amx_available(void) { return 0; }
int cn_amx_begin(void) { return 0; }
void cn_amx_end(void) {}
int64_t cn_amx_rows(const uint16_t *xb, int64_t M, int64_t K, int64_t k0, int64_t kc, const uint32_t *panel16,
                    float *y, int64_t N, int64_t n0, int accumulate) {
    (void)xb, (void)M, (void)K, (void)k0, (void)kc, (void)panel16, (void)y, (void)N, (void)n0, (void)accumulate;
    return 0;
}

#endif
