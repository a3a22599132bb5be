// The library's built-in XXH3 (xxhash.h's header-only build) against libxxhash's, which earlier
// versions called for every hash: the same hashes at every size around XXH3's internal
// boundaries, seeded and not, and through the size policy that picks between them (entries
// written by one are checked by the other, and file-stream names must not move).
#include "util/xxhash.hpp"

#include <gtest/gtest.h>
#include <xxh_x86dispatch.h>
#include <xxhash.h>

#include <cstring>
#include <random>
#include <vector>

namespace {

// XXH3-128's canonical form: the high 64 bits first, each big-endian.
std::array<uint8_t, 16> canonical(XXH128_hash_t h) {
  std::array<uint8_t, 16> out;
  for (int i = 0; i < 8; ++i) {
    out[size_t(i)] = uint8_t(h.high64 >> (56 - 8 * i));
    out[size_t(8 + i)] = uint8_t(h.low64 >> (56 - 8 * i));
  }
  return out;
}

// Sizes on both sides of XXH3's code paths (0-16, 17-128, 129-240, stripes and blocks of the long
// hash) and of the policy's thresholds (1 KiB, 64 KiB).
const size_t kSizes[] = {0,    1,    3,    4,     8,     9,     16,    17,      128,
                         129,  240,  241,  255,   256,   1023,  1024,  1025,    4095,
                         4096, 4097, 8192, 16384, 65535, 65536, 65537, 1 << 20, (1 << 20) + 7};
const uint64_t kSeeds[] = {0, 1, 0x70636163686531ull, 0x9e3779b97f4a7c15ull};

std::vector<uint8_t> random_bytes(size_t n) {
  std::mt19937_64 rng(n);
  std::vector<uint8_t> v(n + 1);  // one more: the input starts at an odd address
  for (uint8_t &b : v) b = uint8_t(rng());
  return v;
}

TEST(Xxhash, TheBuiltInCodeGivesLibxxhashsHashes) {
  for (size_t n : kSizes) {
    const std::vector<uint8_t> bytes = random_bytes(n);
    const uint8_t *p = bytes.data() + 1;
    SCOPED_TRACE(n);
    EXPECT_EQ(progcache::xxh3_64_builtin(p, n, 0), XXH3_64bits(p, n));
    EXPECT_EQ(progcache::xxh3_128_builtin(p, n, 0), canonical(XXH3_128bits(p, n)));
    for (uint64_t seed : kSeeds) {
      SCOPED_TRACE(seed);
      EXPECT_EQ(progcache::xxh3_64_builtin(p, n, seed), XXH3_64bits_withSeed(p, n, seed));
      EXPECT_EQ(progcache::xxh3_64_builtin(p, n, seed), XXH3_64bits_withSeed_dispatch(p, n, seed));
      EXPECT_EQ(progcache::xxh3_128_builtin(p, n, seed),
                canonical(XXH3_128bits_withSeed(p, n, seed)));
      EXPECT_EQ(progcache::xxh3_128_builtin(p, n, seed),
                canonical(XXH3_128bits_withSeed_dispatch(p, n, seed)));
    }
  }
}

TEST(Xxhash, EveryInputSizeGivesTheBuiltInCodesHashes) {
  for (size_t n : kSizes) {
    const std::vector<uint8_t> bytes = random_bytes(n);
    const uint8_t *p = bytes.data() + 1;
    SCOPED_TRACE(n);
    for (uint64_t seed : kSeeds) {
      EXPECT_EQ(progcache::xxh3_64(p, n, seed), progcache::xxh3_64_builtin(p, n, seed));
      EXPECT_EQ(progcache::xxh3_128(p, n, seed), progcache::xxh3_128_builtin(p, n, seed));
    }
  }
  // A 64 KiB input went to libxxhash's dispatched code (the machine has libxxhash).
  EXPECT_TRUE(progcache::xxh3_dispatched_loaded());
}

// A seed prepared ahead gives the seeded hash at every size (entries are checked with the
// other).
TEST(Xxhash, APreparedSeedGivesTheSeededHash) {
  for (size_t n : kSizes) {
    const std::vector<uint8_t> bytes = random_bytes(n);
    const uint8_t *p = bytes.data() + 1;
    SCOPED_TRACE(n);
    for (uint64_t seed : kSeeds) {
      SCOPED_TRACE(seed);
      EXPECT_EQ(progcache::xxh3_128(p, n, progcache::Xxh3Seed(seed, n)),
                progcache::xxh3_128_builtin(p, n, seed));
      // Prepared for another size: still the right hash.
      EXPECT_EQ(progcache::xxh3_128(p, n, progcache::Xxh3Seed(seed, 1000)),
                progcache::xxh3_128_builtin(p, n, seed));
      EXPECT_EQ(progcache::xxh3_128(p, n, progcache::Xxh3Seed(seed, 0)),
                progcache::xxh3_128_builtin(p, n, seed));
    }
  }
  // Every size through the long hash's first blocks, each seeded differently.
  const std::vector<uint8_t> bytes = random_bytes(4100);
  for (size_t n = 0; n < 4100; ++n) {
    const uint64_t seed = n * 0x9e3779b97f4a7c15ull;
    ASSERT_EQ(progcache::xxh3_128(bytes.data() + 1, n, progcache::Xxh3Seed(seed, n)),
              progcache::xxh3_128_builtin(bytes.data() + 1, n, seed))
        << n;
  }
}

// The canonical form names and checksums are written in is libxxhash's.
TEST(Xxhash, TheCanonicalFormIsLibxxhashs) {
  for (size_t n : {size_t(0), size_t(100), size_t(5000)}) {
    const std::vector<uint8_t> bytes = random_bytes(n);
    XXH128_canonical_t want;
    XXH128_canonicalFromHash(&want, XXH3_128bits(bytes.data(), n));
    const std::array<uint8_t, 16> h = progcache::xxh3_128(bytes.data(), n);
    EXPECT_EQ(std::memcmp(h.data(), want.digest, h.size()), 0) << n;
  }
}

}  // namespace
