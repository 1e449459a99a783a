/* Code unpacking (4, 5 and 6 bits), 64-entry byte lookups and a horizontal sum on AVX2, shared by the exact
 * scalar-codebook decode (cq.c) and the int8-activation one (cq_i8_avx2.c).
 * Include only where __AVX2__ is defined. */
#ifndef CN_AVX2_COMMON_H
#define CN_AVX2_COMMON_H
#include <immintrin.h>

/* 6-bit codes to bytes: each lane's low 12 bytes hold 16 codes (the 4 bytes after are ignored).
 * Each 16-bit word gets the two bytes that hold its pair of codes (b0 b1 for codes 0-1, b1 b2
 * for codes 2-3 of a 3-byte run); multiplying the first word by 16 puts both words' second
 * code at bits 10-15 and leaves their first at bits 0-5 and 4-9, so two shifts and masks
 * place all four. */
CN_INLINE __m256i avx2_spread6_by(__m256i raw, __m256i spread) {
    const __m256i w = _mm256_mullo_epi16(_mm256_shuffle_epi8(raw, spread), _mm256_set1_epi32(0x00010010));
    const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(w, 4), _mm256_set1_epi16(0x003f));
    return _mm256_or_si256(lo, _mm256_and_si256(_mm256_srli_epi16(w, 2), _mm256_set1_epi16(0x3f00)));
}

CN_INLINE __m256i avx2_spread6(__m256i raw) {
    return avx2_spread6_by(raw, _mm256_setr_epi8(0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11,
                                                 0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11));
}

/* count (<= 32, a multiple of 4) codes from code v through a buffer, reading no byte past
 * them; the codes after count read as 0. */
CN_INLINE __m256i avx2_codes6_short(const uint8_t *row, int64_t v, int64_t count) {
    const uint8_t *p = row + 3 * (v / 4);
    const int64_t bytes = 3 * count / 4;
    uint8_t buf[32] = {0};
    memcpy(buf, p, (size_t)CN_MIN(12, bytes));
    if (bytes > 12) memcpy(buf + 16, p + 12, (size_t)(bytes - 12));
    return avx2_spread6(_mm256_loadu_si256((const __m256i *)buf));
}

/* Codes v .. v+31 (v a multiple of 4) as bytes: lane 0 codes 0-15, lane 1 codes 16-31.
 * last: a row's last 32 codes, where a 16-byte load at byte 12 would read 4 bytes past
 * the row (past the matrix, on its last row); lane 1 then loads from byte 8 and its
 * shuffle skips the 4 bytes before its codes, at the same cost as any other step (a copy
 * through a stack buffer, as before session 19, stalls store forwarding once per row). */
CN_INLINE __m256i avx2_codes6x32(const uint8_t *row, int64_t v, int last) {
    const uint8_t *p = row + 3 * (v / 4);
    if (last)
        return avx2_spread6_by(_mm256_loadu2_m128i((const __m128i *)(p + 8), (const __m128i *)p),
                               _mm256_setr_epi8(0, 1, 1, 2, 3, 4, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11,
                                                4, 5, 5, 6, 7, 8, 8, 9, 10, 11, 11, 12, 13, 14, 14, 15));
    return avx2_spread6(_mm256_loadu2_m128i((const __m128i *)(p + 12), (const __m128i *)p));
}

/* 5-bit codes to bytes: 32 codes are 20 bytes, eight to a 5-byte run.  raw's lane 0 holds
 * bytes 0-15, lane 1 bytes 4-19.  Each 16-bit word gets the two bytes that hold a pair of codes
 * (pair j of a run: bits 10j .. 10j + 9, from bit 0, 2, 4 or 6 of its first byte); multiplying
 * by 2^(6 - that offset) puts every pair at bits 6-15, and two shifts and masks move its codes
 * to the word's two bytes: lane 0 codes 0-15, lane 1 codes 16-31, in order.  (One multiply per
 * 32 codes; a word per code took two, and variable dword shifts were slower.) */
CN_INLINE __m256i avx2_spread5(__m256i raw) {
    const __m256i pairs = _mm256_setr_epi8(0, 1, 1, 2, 2, 3, 3, 4, 5, 6, 6, 7, 7, 8, 8, 9,
                                           6, 7, 7, 8, 8, 9, 9, 10, 11, 12, 12, 13, 13, 14, 14, 15);
    const __m256i mul = _mm256_setr_epi16(64, 16, 4, 1, 64, 16, 4, 1, 64, 16, 4, 1, 64, 16, 4, 1);
    const __m256i w = _mm256_mullo_epi16(_mm256_shuffle_epi8(raw, pairs), mul);
    return _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 6), _mm256_set1_epi16(31)),
                           _mm256_and_si256(_mm256_srli_epi16(w, 3), _mm256_set1_epi16(0x1f00)));
}

/* Codes v .. v+31 (v a multiple of 8) of 5 bits as bytes, lane 0 codes 0-15, lane 1 codes
 * 16-31: the two 16-byte loads read exactly the 20 bytes that hold them. */
CN_INLINE __m256i avx2_codes5x32(const uint8_t *row, int64_t v) {
    const uint8_t *p = row + 5 * (v / 8);
    return avx2_spread5(_mm256_loadu2_m128i((const __m128i *)(p + 4), (const __m128i *)p));
}

/* count (< 32, a multiple of 8) codes from code v through a buffer; the codes after count
 * read as 0. */
CN_INLINE __m256i avx2_codes5_short(const uint8_t *row, int64_t v, int64_t count) {
    uint8_t buf[20] = {0};
    memcpy(buf, row + 5 * (v / 8), (size_t)(5 * count / 8));
    return avx2_codes5x32(buf, 0);
}

/* Codes v .. v+31 (v a multiple of 32) of 4 bits as bytes, in the same order. */
CN_INLINE __m256i avx2_codes4x32(const uint8_t *row, int64_t v) {
    const __m128i b = _mm_loadu_si128((const __m128i *)(row + v / 2)), m = _mm_set1_epi8(15);
    const __m128i lo = _mm_and_si128(b, m), hi = _mm_and_si128(_mm_srli_epi16(b, 4), m);
    return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}

/* The sum of a vector's eight floats. */
CN_INLINE float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

CN_INLINE __m256i avx2_lookup64(const __m256i t[4], __m256i idx, __m256i m1, __m256i m2, __m256i m3) {
    __m256i r = _mm256_shuffle_epi8(t[0], idx);
    r = _mm256_blendv_epi8(r, _mm256_shuffle_epi8(t[1], idx), m1);
    r = _mm256_blendv_epi8(r, _mm256_shuffle_epi8(t[2], idx), m2);
    return _mm256_blendv_epi8(r, _mm256_shuffle_epi8(t[3], idx), m3);
}

#endif
