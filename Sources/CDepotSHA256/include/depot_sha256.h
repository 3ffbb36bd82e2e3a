#ifndef DEPOT_SHA256_H
#define DEPOT_SHA256_H

#include <stddef.h>
#include <stdint.h>

/// Compresses `blocks` 64-byte blocks at `data` into `state` (a, b, c, d, e, f, g, h) with the
/// processor's SHA-256 instructions, when it has them. Returns 1 when it did, 0 when this
/// processor (or this build's target) has none; the caller then compresses the blocks itself.
/// No I/O, no allocation. See Sources/DepotCore/SHA256Hasher.swift.
int depot_sha256_compress_hw(uint32_t state[8], const uint8_t *data, size_t blocks);

/// The 64 round constants of SHA-256, for the portable compression in Swift.
const uint32_t *depot_sha256_round_constants(void);

/// 1 when depot_sha256_compress_hw uses the processor's SHA-256 instructions, 0 otherwise.
int depot_sha256_hw_available(void);

#endif
