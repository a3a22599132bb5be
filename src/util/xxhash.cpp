#include "util/xxhash.hpp"

#include <atomic>
#include <cstring>

#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/system_library.hpp"

// xxHash's implementation from the system's header, in its header-only mode (made to be used this
// way): static functions of this file, built for the baseline instruction set.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace progcache {
namespace {

// From this size on, an input is hashed by libxxhash's dispatched code, opened if need be: its
// vector code saves more than the ~60 us the opening costs once a few such inputs are hashed.
// Smaller ones, however many, by the built-in code: on a Xeon with AVX-512, a 4 KiB hit whose
// checksum libxxhash's dispatched code computed took 360-560 ns longer than one the built-in
// SSE2 code did (bench/analysis.md; the cause is not pinned down: a C loop of pread and hash
// ran the dispatched code the faster), and a larger record that a loop hits again is vouched
// for and not hashed at all (util/verified_records.hpp).
constexpr size_t kLargeInput = 64 * 1024;

using Hash64 = XXH64_hash_t (*)(const void *, size_t, XXH64_hash_t);
using Hash128 = XXH128_hash_t (*)(const void *, size_t, XXH64_hash_t);

struct Dispatched {
  Hash64 hash64;
  Hash128 hash128;
};

constinit Dispatched g_dispatched{};
constinit std::atomic<bool> g_loaded{false};  // g_dispatched is filled

// libxxhash's run-time dispatched functions (AVX2 or AVX-512): the same hashes as the plain ones,
// which Debian builds for SSE2. The plain ones where the library has no dispatched ones (not an
// x86 build); nullptr, and the built-in code for good, where it cannot be opened.
const Dispatched *open_dispatched() {
  static constinit SystemLibrary library(PCACHE_XXHASH_SONAME);
  static constinit ForkSafeOnce opened;
  opened.run([] {
    try {
      Dispatched d{library.optional_function<Hash64>("XXH3_64bits_withSeed_dispatch"),
                   library.optional_function<Hash128>("XXH3_128bits_withSeed_dispatch")};
      if (!d.hash64) d.hash64 = library.optional_function<Hash64>("XXH3_64bits_withSeed");
      if (!d.hash128) d.hash128 = library.optional_function<Hash128>("XXH3_128bits_withSeed");
      if (!d.hash64 || !d.hash128) return;
      g_dispatched = d;
      g_loaded.store(true, std::memory_order_release);
    } catch (const Error &) {  // no libxxhash: the built-in code hashes everything
    }
  });
  return g_loaded.load(std::memory_order_acquire) ? &g_dispatched : nullptr;
}

// The dispatched functions for an input of size bytes, or nullptr for the built-in code.
const Dispatched *dispatched_for(size_t size) {
  if (size < kLargeInput) return nullptr;
  if (g_loaded.load(std::memory_order_acquire)) return &g_dispatched;
  return open_dispatched();
}

// Shorter inputs are hashed with the seed alone, longer ones by libxxhash (a secret on its stack
// costs nothing beside them).
bool uses_prepared_secret(size_t size) {
  return size > XXH3_MIDSIZE_MAX && size < kLargeInput;
}

std::array<uint8_t, 16> canonical(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  std::array<uint8_t, 16> out;
  std::memcpy(out.data(), c.digest, out.size());
  return out;
}

}  // namespace

uint64_t xxh3_64(const void *data, size_t size, uint64_t seed) {
  if (const Dispatched *d = dispatched_for(size)) return d->hash64(data, size, seed);
  return XXH3_64bits_withSeed(data, size, seed);
}

std::array<uint8_t, 16> xxh3_128(const void *data, size_t size, uint64_t seed) {
  if (const Dispatched *d = dispatched_for(size)) return canonical(d->hash128(data, size, seed));
  return canonical(XXH3_128bits_withSeed(data, size, seed));
}

static_assert(sizeof(Xxh3Seed::secret) == XXH3_SECRET_DEFAULT_SIZE);

Xxh3Seed::Xxh3Seed(uint64_t s, size_t input_size)
    : seed(s), prepared(uses_prepared_secret(input_size)) {
  if (prepared) XXH3_generateSecret_fromSeed(secret, s);
}

std::array<uint8_t, 16> xxh3_128(const void *data, size_t size, const Xxh3Seed &seed) {
  if (!seed.prepared || !uses_prepared_secret(size)) return xxh3_128(data, size, seed.seed);
  return canonical(
      XXH3_128bits_withSecretandSeed(data, size, seed.secret, sizeof seed.secret, seed.seed));
}

uint64_t xxh3_64_builtin(const void *data, size_t size, uint64_t seed) {
  return XXH3_64bits_withSeed(data, size, seed);
}

std::array<uint8_t, 16> xxh3_128_builtin(const void *data, size_t size, uint64_t seed) {
  return canonical(XXH3_128bits_withSeed(data, size, seed));
}

bool xxh3_dispatched_loaded() {
  return g_loaded.load(std::memory_order_acquire);
}

}  // namespace progcache
