// XXH3 (entry checksums, file-stream names, small record checks; xxHash's output is frozen since
// 0.8.0). Computed by xxhash.h's own implementation, built into the library from the system's
// header (its header-only mode), so that a process that hashes only small inputs, as a fresh
// process's hit does (its entry, a counter record, a memo's name), maps nothing for it: opening
// libxxhash cost such a process ~60 us. Inputs of 64 KiB and more go to libxxhash's run-time
// dispatched functions (AVX2 or AVX-512 where the CPU has them, 2-3 times as fast over a large
// input as the baseline build; over a small one between system calls they were slower, see
// xxhash.cpp), opened on first such use like the other system libraries
// (util/system_library.hpp). Not linked: every object a process links sits in the scope that each
// later dlopen's symbol relocations search first (bench/analysis.md).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace progcache {

// XXH3_64bits_withSeed of size bytes at data (seed 0: XXH3_64bits).
uint64_t xxh3_64(const void *data, size_t size, uint64_t seed = 0);
// XXH3_128bits_withSeed (seed 0: XXH3_128bits), in its canonical byte order
// (XXH128_canonicalFromHash: the high 64 bits first, each big-endian).
std::array<uint8_t, 16> xxh3_128(const void *data, size_t size, uint64_t seed = 0);
// Both thread-safe and never throw: where libxxhash cannot be opened, the built-in code hashes
// every input. The same hashes either way (test Xxhash.*).

// A seed's secret, derived before the input it will hash is written. xxh3_128 with a seed
// derives it on the stack for each input of more than 240 bytes, and its loads of it do not line
// up with the stores that wrote it, so they wait until those stores reach the cache; stores do
// so in order, so after a copy into memory that is not in the cache they wait for the copy's
// misses too (a record built in a block a large store's eviction freed: bench/analysis.md).
// Prepared first, the secret is in the cache by then. Prepared only for an input of a size that
// uses it (241 bytes to 64 KiB); any other is still hashed right, as xxh3_128(data, size, seed).
struct Xxh3Seed {
  Xxh3Seed(uint64_t seed, size_t input_size);
  uint64_t seed;
  bool prepared;
  alignas(64) uint8_t secret[192];
};
// xxh3_128(data, size, seed.seed), with seed's prepared secret where it has one.
std::array<uint8_t, 16> xxh3_128(const void *data, size_t size, const Xxh3Seed &seed);

// The built-in implementation alone, whatever the size (tests compare it with libxxhash's).
uint64_t xxh3_64_builtin(const void *data, size_t size, uint64_t seed);
std::array<uint8_t, 16> xxh3_128_builtin(const void *data, size_t size, uint64_t seed);

// Whether this process has opened libxxhash's dispatched functions (tests).
bool xxh3_dispatched_loaded();

}  // namespace progcache
