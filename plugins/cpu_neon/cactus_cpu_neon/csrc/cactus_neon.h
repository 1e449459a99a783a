/* The C API of the cpu_neon kernels.  This file is read verbatim by cffi's
 * cdef, so it holds plain declarations only: no macros, no includes.
 *
 * Conventions: every array is C-contiguous; activations are float32.
 * Weight types (wtype): 0 = float32, 1 = float16, 2 = bfloat16 (raw uint16
 * words).  16-bit weights are read in place and widened in registers.
 * Sizes are int64_t so that large matrices never overflow an index.
 * Attention: window < 0 means no sliding window, softcap <= 0 means none,
 * mask (may be NULL) is indexed with element strides ms0..ms3 (0 = broadcast);
 * k and v (kvtype 0 = float32, 1 = float16) share element strides kvs0
 * (batch) and kvs1 (head) with rows of d contiguous values, so a view into a
 * preallocated KV cache needs no copy. */

void cn_set_threads(int n);
int cn_get_threads(void);
int cn_native_neon(void);
int cn_threading(void); /* 0 single-threaded, 1 OpenMP, 2 POSIX thread pool */

void cn_linear(const float *x, int64_t M, int64_t K, const void *w, int wtype,
               int64_t N, const float *bias, float *y);

void cn_embedding(const void *table, int wtype, int64_t D, const int64_t *ids,
                  int64_t n, float *out);

void cn_rms_norm(const float *x, const float *w, float *out, int64_t rows,
                 int64_t D, float eps, int unit_offset);

void cn_layer_norm(const float *x, const float *w, const float *b, float *out,
                   int64_t rows, int64_t D, float eps);

/* cn_rope and cn_rope_qk return -2 when out of memory, else 0. */
int cn_rope(const float *x, float *out, int64_t BH, int64_t L, int64_t hd,
            const double *positions, const float *inv_freq, int64_t half);

/* RoPE of queries (BHq rows of L positions) and keys (BHk rows) with one
 * table of angles; q_norm / k_norm (may be NULL) RMS-norm each row of hd
 * values first (QK-norm, weight + 1 with unit_offset). */
int cn_rope_qk(const float *q, const float *k, float *q_out, float *k_out, int64_t BHq, int64_t BHk,
               int64_t L, int64_t hd, const double *positions, const float *inv_freq, int64_t half,
               const float *q_norm, const float *k_norm, float eps, int unit_offset);

void cn_softmax(const float *x, float *out, int64_t rows, int64_t n);

void cn_activation(const float *x, float *out, int64_t n, int kind);

void cn_gated_activation(const float *gate, const float *up, float *out,
                         int64_t n, int kind);

void cn_hadamard(const float *x, float *out, int64_t rows, int64_t n,
                 int64_t block);

void cn_attention(const float *q, const void *k, const void *v, int kvtype,
                  float *out, int64_t B, int64_t Hq, int64_t Hkv, int64_t L,
                  int64_t S, int64_t d, float scale, int64_t q_offset, int causal,
                  int64_t window, float softcap, const float *mask,
                  int64_t ms0, int64_t ms1, int64_t ms2, int64_t ms3,
                  int64_t kvs0, int64_t kvs1);

/* Store k, v (B, Hkv, L, d; contiguous float32) at rows [offset, offset + L)
 * of one layer's contiguous cache (B, Hkv, max_len, d; kvtype 0 float32,
 * 1 float16 rounded to nearest even), then causal cn_attention of q (B, Hq,
 * L, d) over rows [0, offset + L) of the cache, or over k, v as given when
 * own != 0 (a prompt's first chunk: not read back from a float16 cache).
 * Returns -1 when the rows do not fit the cache or the heads do not group. */
int cn_cached_attention(const float *q, const float *k, const float *v, void *cache_k, void *cache_v, int kvtype,
                        float *out, int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t d, int64_t max_len,
                        int64_t offset, float scale, int64_t window, float softcap, int own);

/* CQ weights (docs/formats.md): codebook widened to float32, scales float16
 * words, signs the +-1 sign vector as float32 (K,).  x is rotated inside
 * (x' = H(x * signs) per block); signs == NULL means x is already rotated.
 * bf16 != 0: prefill (M > 1) multiplies in bfloat16 where the CPU has
 * AVX512_BF16 (cn_gemm_bf16_available; not exact, about 2e-3 relative);
 * decode and other CPUs ignore it.
 * Returns -1 for a layout it cannot run, -2 when out of memory. */
int cn_cq_linear(const float *x, int64_t M, int64_t K, const uint8_t *codes,
                 int64_t stride, int index_bits, int vec_dim,
                 const uint16_t *scales, int64_t group, const float *codebook,
                 const float *signs, int64_t block, int64_t N,
                 const float *bias, float *y, int bf16);
int cn_gemm_bf16_available(void);
/* Whether those bfloat16 products run on AMX tiles (gemm_amx.c: an AMX build on a kernel
 * that grants the tiles, CACTUS_AMX not 0). */
int cn_gemm_amx_available(void);

/* CQ decode with int8 activations (docs/cpu_neon.md): each row of x is
 * rotated, quantized to int8 per scale group, and multiplied by the codebook
 * quantized to int8 (cb_q8: vec_dim planes of 2^index_bits values, entry
 * (c, e) = cb_q8[e << index_bits | c] * cb_scale) with integer dot products.
 * Not exact (about 1e-2 relative to the result's magnitude).  8- and 6-bit
 * codes of 2- and 4-vectors (CQ4, CQ3, CQ2) and 6- and 5-bit codes of scalars
 * (the cq6 / cq5 heads; 5-bit groups a multiple of 8) and 4-bit codes of
 * scalars (CQ4); returns -1 for other
 * layouts, -2 when out of memory.  cn_cq_i8_kernel says what this build has for a
 * layout: 2 a
 * kernel measured faster than cn_cq_linear's exact decode (AVX-512 VBMI +
 * VNNI), 1 a native kernel whose speed is not measured (arm64 NEON), 0 none
 * (the NEON source through SIMDe, which still computes it, slowly). */
int cn_cq_linear_i8(const float *x, int64_t M, int64_t K, const uint8_t *codes,
                    int64_t stride, int index_bits, int vec_dim,
                    const uint16_t *scales, int64_t group, const int8_t *cb_q8,
                    float cb_scale, const float *signs, int64_t block, int64_t N,
                    const float *bias, float *y);
int cn_cq_i8_kernel(int index_bits, int vec_dim);
/* The largest magnitude cb_q8 may hold for a layout: 63 for 4-bit scalar
 * codes (the AVX2 kernel looks them up as q + 64), else 127. */
int cn_cq_i8_cb_limit(int index_bits, int vec_dim);

/* int4 / int8 affine groups (RTN, GPTQ): codes packed per row (int4: low
 * nibble first), scales and biases float16 words (N, K / group).  Returns -1
 * for a layout it cannot run. */
int cn_affine_linear(const float *x, int64_t M, int64_t K, const uint8_t *codes,
                     int bits, const uint16_t *scales, const uint16_t *biases,
                     int64_t group, int64_t N, const float *bias, float *y);

/* Embedding rows ids[0..n) of quantized tables (vocab, D), in the original
 * (unrotated) space, to out (n, D).  Same layouts as the linear kernels.
 * Returns -1 for a layout it cannot run, -3 for an id outside [0, vocab). */
int cn_cq_embedding(const uint8_t *codes, int64_t stride, int index_bits,
                    int vec_dim, const uint16_t *scales, int64_t group,
                    const float *codebook, const float *signs, int64_t block,
                    int64_t vocab, int64_t D, const int64_t *ids, int64_t n,
                    float *out);

int cn_affine_embedding(const uint8_t *codes, int bits, const uint16_t *scales,
                        const uint16_t *biases, int64_t group, int64_t vocab,
                        int64_t D, const int64_t *ids, int64_t n, float *out);

/* Fused CQ projections (fused.c): n (1..8) weights reading the same x (q/k/v,
 * gate/up) in one call.  Each weight carries cn_cq_linear's arguments and,
 * for int8-activation decode, cn_cq_linear_i8's int8 codebook (cb_q8 NULL:
 * none).  x is rotated once per distinct sign vector (pointer and block),
 * so weights quantized with one seed share it.  y holds the n outputs one
 * after another, (M, N_i) each; with gated >= 0 (an activation kind, n == 2,
 * equal N) y is (M, N) = act(out_0) * out_1 instead.  norm_w (may be NULL)
 * RMS-normalises x first, as cn_rms_norm (a block's pre-norm).  i8 != 0: one-row
 * calls (decode) with int8 activations when every weight has cb_q8, in one
 * parallel region over all the weights' rows.  Returns -1 for a layout or
 * argument it cannot run, -2 when out of memory. */
typedef struct {
    const uint8_t *codes;
    int64_t stride;
    int index_bits, vec_dim;
    const uint16_t *scales;
    int64_t group;
    const float *codebook;
    const int8_t *cb_q8;
    float cb_scale;
    const float *signs;
    int64_t block, N;
    const float *bias;
} cn_cq_weight;

int cn_cq_linear_multi(const float *x, int64_t M, int64_t K, int n, const cn_cq_weight *w, float *y,
                       const float *norm_w, float eps, int unit_offset, int bf16, int i8, int gated);

/* The same for float32 / float16 / bfloat16 weights (wtype as cn_linear). */
typedef struct {
    const void *w;
    int wtype;
    int64_t N;
    const float *bias;
} cn_float_weight;

int cn_linear_multi(const float *x, int64_t M, int64_t K, int n, const cn_float_weight *w, float *y,
                    const float *norm_w, float eps, int unit_offset, int gated);

/* One decoder block (block.c) of one token (B = L = 1): RMSNorm, q/k/v, QK-norm
 * (q_norm / k_norm may be NULL) and RoPE at position offset (inv_freq of half
 * frequencies), the K/V store into one layer's contiguous cache (1, Hkv, max_len,
 * d; kvtype as cn_cached_attention) and attention over it (window < 0: none),
 * o_proj and the residual, RMSNorm, act(gate) * up (act: cn_activation's kinds),
 * down and the residual; out (D) = the block's output.  The seven weights are q,
 * k, v, o, gate, up, down: cq[] (kind 0; cb_q8 set: int8-activation decode) or
 * fw[] (kind 1).  The same kernels as the separate calls, in the same order: the
 * same result.  Returns -1 for shapes or layouts it cannot run, -2 when out of
 * memory. */
typedef struct {
    int kind, act, bf16;
    int64_t D, F, Hq, Hkv, d, half, window;
    float eps, scale;
    const float *attn_norm, *mlp_norm, *q_norm, *k_norm, *inv_freq;
    cn_cq_weight cq[7];
    cn_float_weight fw[7];
} cn_block;

int cn_decoder_block(const cn_block *b, const float *x, float *out, void *cache_k, void *cache_v, int kvtype,
                     int64_t max_len, int64_t offset);

/* Blocks b[0..n-1] in order on one token: out = the last block's output, each
 * block's K/V in its own layer's cache (cache_k[i], cache_v[i], all of one kvtype
 * and max_len).  The same cn_decoder_block calls, in place on out (x and out may
 * be the same array): the same result as n calls, without a return to Python
 * between layers.  Returns -1 for blocks of different widths or a block
 * cn_decoder_block refuses, -2 when out of memory. */
int cn_decoder_stack(const cn_block *const *b, int n, const float *x, float *out, void *const *cache_k,
                     void *const *cache_v, int kvtype, int64_t max_len, int64_t offset);

/* Phase timing of cn_decoder_block (bench --breakdown): on != 0 zeroes the
 * counters and starts summing, per phase (q/k/v with the norm, QK-norm + RoPE,
 * K/V store + attention, o_proj + residual, norm + gate/up, down + residual),
 * wall nanoseconds and weight bytes read; read returns the calls summed. */
void cn_block_profile(int on);
int64_t cn_block_profile_read(int64_t *ns, int64_t *bytes);
