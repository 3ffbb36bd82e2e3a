// CRC-32 (IEEE 802.3, reflected, the checksum of Depot's GDBM records and journal) folded
// 64 bytes at a time with carry-less multiplication (PCLMULQDQ) on x86-64.
//
// depot_crc32_fold reduces the first `length` bytes of a message (length >= 64, a multiple
// of 16) to 16 bytes with the same CRC register effect: running the table-driven CRC from a
// zero register over the 16 bytes written to `out` gives the register the whole prefix would
// have given from `state`. The caller finishes with its table (those 16 bytes, then the tail).
//
// Folding a 128-bit block forward by N bits multiplies its low 64 bits (earlier bytes) by
// x^(N+32) mod P and its high 64 bits by x^(N-32) mod P, each bit-reflected and shifted left
// by one (the reflected product of two reflected operands is one bit short). For N = 512
// (four blocks in flight) and N = 128 (one block) that gives the constants below; Depot's
// tests check the result against the table on random messages of every length.
#ifndef DEPOT_CRC32_FOLD_H
#define DEPOT_CRC32_FOLD_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#include <wmmintrin.h>

/// Nonzero when the CPU has PCLMULQDQ (CPUID leaf 1, ECX bit 1).
static inline int depot_crc32_fold_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    return (ecx & bit_PCLMUL) != 0;
}

__attribute__((target("pclmul,sse2")))
static inline __m128i depot_crc32_fold_step(__m128i x, __m128i k) {
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse2")))
static inline void depot_crc32_fold(const uint8_t *p, size_t length, uint32_t state, uint8_t *out) {
    const __m128i k512 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);  // high: x^480, low: x^544
    const __m128i k128 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);  // high: x^96, low: x^160
    __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)state));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    length -= 64;
    while (length >= 64) {
        x0 = _mm_xor_si128(depot_crc32_fold_step(x0, k512), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(depot_crc32_fold_step(x1, k512), _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = _mm_xor_si128(depot_crc32_fold_step(x2, k512), _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = _mm_xor_si128(depot_crc32_fold_step(x3, k512), _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        length -= 64;
    }
    __m128i x = _mm_xor_si128(depot_crc32_fold_step(x0, k128), x1);
    x = _mm_xor_si128(depot_crc32_fold_step(x, k128), x2);
    x = _mm_xor_si128(depot_crc32_fold_step(x, k128), x3);
    while (length >= 16) {
        x = _mm_xor_si128(depot_crc32_fold_step(x, k128), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        length -= 16;
    }
    _mm_storeu_si128((__m128i *)out, x);
}
#endif

#endif
