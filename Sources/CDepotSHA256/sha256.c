// SHA-256 compression with the x86 SHA extensions (SHA256RNDS2, SHA256MSG1, SHA256MSG2),
// chosen at run time by CPUID; the portable path stays in Swift (SHA256Hasher.swift, whose
// tests compare the two).
// Functions carry their own target attribute, so the package needs no compiler flags.

#include "depot_sha256.h"

// The round constants: the first 32 bits of the fractional parts of the cube roots of the
// first 64 primes (FIPS 180-4, 4.2.2). The Swift code uses them too.
static const uint32_t depot_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

const uint32_t *depot_sha256_round_constants(void) { return depot_sha256_k; }

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

// -1: not probed yet; 0: no; 1: yes. A benign race: every thread computes the same answer.
static int depot_sha256_hw = -1;

static int depot_sha256_probe(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    int ssse3 = (c >> 9) & 1, sse41 = (c >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    int sha = (b >> 29) & 1;
    return ssse3 && sse41 && sha;
}

int depot_sha256_hw_available(void) {
    int known = __atomic_load_n(&depot_sha256_hw, __ATOMIC_RELAXED);
    if (known < 0) {
        known = depot_sha256_probe();
        __atomic_store_n(&depot_sha256_hw, known, __ATOMIC_RELAXED);
    }
    return known;
}

__attribute__((target("sha,sse4.1,ssse3")))
static void depot_sha256_compress_ni(uint32_t state[8], const uint8_t *data, size_t blocks) {
    // Each 32-bit word of the message is big-endian: reverse the bytes within every dword.
    const __m128i swap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    // SHA256RNDS2 keeps the state as two registers, high dword first: (A, B, E, F) and
    // (C, D, G, H).
    __m128i abef = _mm_set_epi32((int)state[0], (int)state[1], (int)state[4], (int)state[5]);
    __m128i cdgh = _mm_set_epi32((int)state[2], (int)state[3], (int)state[6], (int)state[7]);
    for (size_t block = 0; block < blocks; block++) {
        const uint8_t *p = data + block * 64;
        const __m128i abef0 = abef, cdgh0 = cdgh;
        // w[i & 3] holds message words 4i .. 4i+3, dword 0 first.
        __m128i w[4];
        for (int i = 0; i < 4; i++) w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * i)), swap);
        for (int i = 0; i < 16; i++) {
            if (i >= 4) {
                // W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) + W[t-16], four at a time:
                // MSG1 gives W[t-16] + σ0(W[t-15]); add W[t-7 ..]; MSG2 adds the σ1 terms.
                __m128i t16 = w[i & 3], t12 = w[(i + 1) & 3], t8 = w[(i + 2) & 3], t4 = w[(i + 3) & 3];
                __m128i partial = _mm_add_epi32(_mm_sha256msg1_epu32(t16, t12), _mm_alignr_epi8(t4, t8, 4));
                w[i & 3] = _mm_sha256msg2_epu32(partial, t4);
            }
            __m128i wk = _mm_add_epi32(w[i & 3], _mm_loadu_si128((const __m128i *)(depot_sha256_k + 4 * i)));
            // Two rounds with dwords 0 and 1 of wk: the new (A, B, E, F) lands in cdgh, and the
            // old (A, B, E, F) is now (C, D, G, H); two more with dwords 2 and 3 swap them back.
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    uint32_t x[4], y[4];
    _mm_storeu_si128((__m128i *)x, abef);  // x = F, E, B, A
    _mm_storeu_si128((__m128i *)y, cdgh);  // y = H, G, D, C
    state[0] = x[3]; state[1] = x[2]; state[2] = y[3]; state[3] = y[2];
    state[4] = x[1]; state[5] = x[0]; state[6] = y[1]; state[7] = y[0];
}

int depot_sha256_compress_hw(uint32_t state[8], const uint8_t *data, size_t blocks) {
    if (!depot_sha256_hw_available()) return 0;
    depot_sha256_compress_ni(state, data, blocks);
    return 1;
}

#else

int depot_sha256_hw_available(void) { return 0; }

int depot_sha256_compress_hw(uint32_t state[8], const uint8_t *data, size_t blocks) {
    (void)state; (void)data; (void)blocks;
    return 0;
}

#endif
