"""Metal Shading Language kernels and their launch geometry.

Each kernel is the *body* of a Metal function; ``mx.fast.metal_kernel`` writes
the signature from the input/output names (``const device T* name``, plus
``name_shape``/``name_ndim`` when the body uses them) and adds the thread
position attributes the body mentions.  Template arguments are integers only,
so this module needs neither MLX nor a Mac: tests check the launch geometry
here and the sources with a C++ syntax pass on any machine.

All arithmetic is float32 (scales and codebooks are stored as half and
widened), matching numpy_ref within the conformance tolerances.

UNTESTED ON HARDWARE: written against the MSL 3 spec and MLX's custom-kernel
contract; docs/metal.md says how to run the conformance suite on a Mac.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SIMD = 32  # Apple GPU SIMD-group width
MATVEC_MAX_ROWS = 8  # up to this many activation rows, decode with one SIMD-group per output
TILE = 32  # matmul tile: 32 outputs x 32 activation rows, K in steps of 32
TILE_ROWS_PER_THREAD = 4  # 32 activation rows over 8 thread rows

HEADER = r"""
// Helpers take pointers as a template type: MLX may bind small inputs in the
// constant address space rather than device, and this compiles for either.

// Index j of a row packed by cactus_core.formats.pack_bits (little-endian bit
// stream).  Rows carry two zero bytes of padding so a code may read 3 bytes.
template <int BITS, typename P>
inline uint cq_code(P row, int j) {
    if (BITS == 8) return uint(row[j]);
    if (BITS == 4) return (uint(row[j >> 1]) >> ((j & 1) * 4)) & 15u;
    int bit = j * BITS;
    int b = bit >> 3;
    uint word = uint(row[b]) | (uint(row[b + 1]) << 8) | (uint(row[b + 2]) << 16);
    return (word >> (bit & 7)) & ((1u << BITS) - 1u);
}

// Weight (o, k) of a cq matrix in the rotated domain: codebook[idx] * scale.
template <int BITS, int VD, int GROUP, typename C, typename S, typename B>
inline float cq_weight(C codes, S scales, B codebook, int row_bytes, int n_groups, int o, int k) {
    uint idx = cq_code<BITS>(codes + o * row_bytes, k / VD);
    return float(codebook[idx * VD + (k % VD)]) * float(scales[o * n_groups + k / GROUP]);
}

// erf with fractional error below 1.2e-7 (Chebyshev fit of erfc); MSL has no erf.
inline float cactus_erf(float x) {
    float z = metal::abs(x);
    float t = 1.0f / (1.0f + 0.5f * z);
    float r = t * metal::precise::exp(-z * z - 1.26551223f + t * (1.00002368f + t * (0.37409196f +
              t * (0.09678418f + t * (-0.18628806f + t * (0.27886807f + t * (-1.13520398f +
              t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
    return x >= 0.0f ? 1.0f - r : r - 1.0f;
}

template <int ACT>
inline float cactus_act(float x) {
    if (ACT == 0) return x / (1.0f + metal::precise::exp(-x));                        // silu
    if (ACT == 1) return 0.5f * x * (1.0f + cactus_erf(x * 0.70710678118654752f));    // gelu
    if (ACT == 2) {                                                                    // gelu_tanh
        float c = 0.79788456080286536f;
        return 0.5f * x * (1.0f + metal::precise::tanh(c * (x + 0.044715f * x * x * x)));
    }
    return metal::max(x, 0.0f);                                                        // relu
}
"""

# y[m, o] = sum_k x[m, k] * W'[o, k] for few rows m: one SIMD-group per output
# o decodes its row once and serves all M activation rows.
CQ_MATVEC = r"""
    uint lane = thread_position_in_grid.x;
    int o = int(thread_position_in_grid.y);
    int n = x_shape[1];
    int n_out = scales_shape[0];
    int row_bytes = codes_shape[1];
    int n_groups = scales_shape[1];
    if (o >= n_out) return;
    float acc[M];
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    auto crow = codes + o * row_bytes;
    for (int j = int(lane); j < n / VD; j += 32) {
        uint idx = cq_code<BITS>(crow, j);
        float s = float(scales[o * n_groups + (j * VD) / GROUP]);
        for (int t = 0; t < VD; ++t) {
            float w = float(codebook[idx * VD + t]) * s;
            for (int m = 0; m < M; ++m) acc[m] += w * x[m * n + j * VD + t];
        }
    }
    for (int m = 0; m < M; ++m) {
        float total = simd_sum(acc[m]);
        if (lane == 0) y[m * n_out + o] = total;
    }
"""

# Tiled y = x @ W'.T for prefill: each 32x8 threadgroup dequantizes a 32x32
# tile of W' into threadgroup memory once and reuses it for 32 activation rows.
CQ_MATMUL = r"""
    threadgroup float Ws[32][33];
    threadgroup float Xs[32][33];
    uint tx = thread_position_in_threadgroup.x;
    uint ty = thread_position_in_threadgroup.y;
    int o0 = int(threadgroup_position_in_grid.x) * 32;
    int m0 = int(threadgroup_position_in_grid.y) * 32;
    int n = x_shape[1];
    int rows = x_shape[0];
    int n_out = scales_shape[0];
    int row_bytes = codes_shape[1];
    int n_groups = scales_shape[1];
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < n; k0 += 32) {
        int k = k0 + int(tx);
        for (int r = 0; r < 4; ++r) {
            int i = int(ty) + 8 * r;
            Ws[i][tx] = (o0 + i < n_out && k < n)
                ? cq_weight<BITS, VD, GROUP>(codes, scales, codebook, row_bytes, n_groups, o0 + i, k) : 0.0f;
            Xs[i][tx] = (m0 + i < rows && k < n) ? x[(m0 + i) * n + k] : 0.0f;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (int kk = 0; kk < 32; ++kk) {
            float w = Ws[tx][kk];
            for (int r = 0; r < 4; ++r) acc[r] += Xs[int(ty) + 8 * r][kk] * w;
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (int r = 0; r < 4; ++r) {
        int m = m0 + int(ty) + 8 * r;
        if (m < rows && o0 + int(tx) < n_out) y[m * n_out + o0 + int(tx)] = acc[r];
    }
"""

# One SIMD-group per row: x / sqrt(mean(x^2) + eps) * (w [+ 1]).
RMS_NORM = r"""
    uint lane = thread_position_in_grid.x;
    int row = int(thread_position_in_grid.y);
    int D = w_shape[0];
    auto xr = x + row * D;
    float ss = 0.0f;
    for (int i = int(lane); i < D; i += 32) ss += xr[i] * xr[i];
    ss = simd_sum(ss);
    float inv = 1.0f / metal::precise::sqrt(ss / float(D) + eps[0]);
    for (int i = int(lane); i < D; i += 32)
        out[row * D + i] = xr[i] * inv * (float(w[i]) + (UNIT_OFFSET ? 1.0f : 0.0f));
"""

# Rotate-half RoPE on rows of (B*H*L, head_dim); cos/sin tables (L, rot/2)
# come from the host in float64-accurate float32, like numpy_ref's.
ROPE = r"""
    int i = int(thread_position_in_grid.x);
    int row = int(thread_position_in_grid.y);
    int hd = x_shape[1];
    int L = cos_t_shape[0];
    int nh = cos_t_shape[1];
    int l = row % L;
    auto xr = x + row * hd;
    float v;
    if (i < nh) {
        v = xr[i] * cos_t[l * nh + i] - xr[i + nh] * sin_t[l * nh + i];
    } else if (i < 2 * nh) {
        int c = i - nh;
        v = xr[i] * cos_t[l * nh + c] + xr[c] * sin_t[l * nh + c];
    } else {
        v = xr[i];
    }
    out[row * hd + i] = v;
"""

GATED_ACTIVATION = r"""
    uint i = thread_position_in_grid.x;
    if (int(i) < gate_shape[0]) out[i] = cactus_act<ACT>(gate[i]) * up[i];
"""

# Attention over the KV cache, one SIMD-group per (batch, head, query): lanes
# split head_dim, keys stream through an online softmax, so any cache length
# fits in registers.  GQA maps query head h to KV head h / (Hq / Hkv).
ATTENTION = r"""
    uint lane = thread_position_in_grid.x;
    int l = int(thread_position_in_grid.y);
    int bh = int(thread_position_in_grid.z);
    int Hq = q_shape[1], L = q_shape[2], d = q_shape[3];
    int Hkv = k_shape[1], S = k_shape[2];
    int b = bh / Hq, h = bh % Hq;
    int kvh = h / (Hq / Hkv);
    auto qr = q + ((b * Hq + h) * L + l) * d;
    auto kb = k + (b * Hkv + kvh) * S * d;
    auto vb = v + (b * Hkv + kvh) * S * d;
    float scale = fparams[0], softcap = fparams[1];
    int pos = iparams[0] + l;
    int lo = 0, hi = S;
    if (iparams[1] != 0) hi = metal::min(S, pos + 1);            // causal
    if (iparams[2] > 0) lo = metal::max(0, pos - iparams[2] + 1);  // sliding window
    float qv[DPL], acc[DPL];
    for (int r = 0; r < DPL; ++r) {
        int c = int(lane) + 32 * r;
        qv[r] = c < d ? qr[c] : 0.0f;
        acc[r] = 0.0f;
    }
    float run_max = -INFINITY, den = 0.0f;
    for (int j = lo; j < hi; ++j) {
        float part = 0.0f;
        for (int r = 0; r < DPL; ++r) {
            int c = int(lane) + 32 * r;
            if (c < d) part += qv[r] * kb[j * d + c];
        }
        float s = simd_sum(part) * scale;
        if (softcap > 0.0f) s = softcap * metal::precise::tanh(s / softcap);
        float new_max = metal::max(run_max, s);
        float corr = metal::precise::exp(run_max - new_max);
        float p = metal::precise::exp(s - new_max);
        den = den * corr + p;
        for (int r = 0; r < DPL; ++r) {
            int c = int(lane) + 32 * r;
            if (c < d) acc[r] = acc[r] * corr + p * vb[j * d + c];
        }
        run_max = new_max;
    }
    for (int r = 0; r < DPL; ++r) {
        int c = int(lane) + 32 * r;
        if (c < d) out[((b * Hq + h) * L + l) * d + c] = den > 0.0f ? acc[r] / den : 0.0f;
    }
"""


@dataclass(frozen=True)
class KernelSpec:
    """What ``mx.fast.metal_kernel`` is built from."""

    name: str
    inputs: tuple[str, ...]
    #: MSL element type of each input as the wrapper passes it (all 1-D or more: 0-d
    #: inputs would become references, whose form differs between MLX versions).
    types: tuple[str, ...]
    outputs: tuple[str, ...]
    source: str
    header: str = HEADER


_CQ_IN, _CQ_T = ("x", "codes", "scales", "codebook"), ("float", "uint8_t", "half", "half")
KERNELS = {
    "cq_matvec": KernelSpec("cactus_cq_matvec", _CQ_IN, _CQ_T, ("y",), CQ_MATVEC),
    "cq_matmul": KernelSpec("cactus_cq_matmul", _CQ_IN, _CQ_T, ("y",), CQ_MATMUL),
    "rms_norm": KernelSpec("cactus_rms_norm", ("x", "w", "eps"), ("float",) * 3, ("out",), RMS_NORM),
    "rope": KernelSpec("cactus_rope", ("x", "cos_t", "sin_t"), ("float",) * 3, ("out",), ROPE),
    "gated_activation": KernelSpec("cactus_gated_activation", ("gate", "up"), ("float",) * 2, ("out",),
                                   GATED_ACTIVATION),
    "attention": KernelSpec("cactus_attention", ("q", "k", "v", "iparams", "fparams"),
                            ("float", "float", "float", "int", "float"), ("out",), ATTENTION),
}

ACT_CODES = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3}


@dataclass(frozen=True)
class Launch:
    """One dispatch: grid in threads (MLX's convention), threadgroup, integer template args."""

    kernel: str
    grid: tuple[int, int, int]
    threadgroup: tuple[int, int, int]
    template: tuple[tuple[str, int], ...] = field(default=())


def _ceil(a: int, b: int) -> int:
    return -(-a // b) * b


def cq_linear_launch(rows: int, n_out: int, bits: int, vec_dim: int, group: int) -> Launch:
    """Matrix-vector for up to MATVEC_MAX_ROWS activation rows, tiled matrix-matrix beyond."""
    tmpl = (("BITS", bits), ("VD", vec_dim), ("GROUP", group))
    if rows <= MATVEC_MAX_ROWS:
        return Launch("cq_matvec", (SIMD, n_out, 1), (SIMD, 1, 1), tmpl + (("M", rows),))
    return Launch("cq_matmul", (_ceil(n_out, TILE), _ceil(rows, TILE) // TILE_ROWS_PER_THREAD, 1),
                  (TILE, TILE // TILE_ROWS_PER_THREAD, 1), tmpl)


def rms_norm_launch(rows: int, unit_offset: bool) -> Launch:
    return Launch("rms_norm", (SIMD, rows, 1), (SIMD, 1, 1), (("UNIT_OFFSET", int(bool(unit_offset))),))


def rope_launch(rows: int, head_dim: int) -> Launch:
    return Launch("rope", (head_dim, rows, 1), (min(head_dim, 256), 1, 1))


def gated_activation_launch(size: int, kind: str) -> Launch:
    return Launch("gated_activation", (_ceil(size, 256), 1, 1), (256, 1, 1), (("ACT", ACT_CODES[kind]),))


def attention_launch(batch: int, q_heads: int, q_len: int, head_dim: int) -> Launch:
    return Launch("attention", (SIMD, q_len, batch * q_heads), (SIMD, 1, 1), (("DPL", -(-head_dim // SIMD)),))
