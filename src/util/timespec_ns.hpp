// A file's or a clock's time as int64 nanoseconds since the epoch. int64 nanoseconds reach
// 1677-2262, and file dates lie beyond (ext4 keeps 1901-2446; `touch -d` sets any date), where
// `tv_sec * 1000000000` overflowed.
#pragma once

#include <cstdint>
#include <ctime>

namespace progcache {

// Within +-2^62 ns of the epoch (years 1823-2116): the range where times are compared.
inline bool within_held_range(const struct timespec &t) {
  constexpr int64_t kLimitSeconds = (int64_t(1) << 62) / 1000000000;
  return t.tv_sec > -kLimitSeconds && t.tv_sec < kLimitSeconds;
}

// Exact within the held range and clamped to its ends beyond: for ages and orderings (the
// difference of two held values never overflows).
inline int64_t held_ns(const struct timespec &t) {
  constexpr int64_t kLimit = int64_t(1) << 62;
  if (!within_held_range(t)) return t.tv_sec < 0 ? -kLimit : kLimit;
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

// Exact from 1677 to 2262 and wrapped (modulo 2^64, defined) beyond: for identities, where two
// dates must stay two values; never compared as times outside the held range.
inline int64_t identity_ns(const struct timespec &t) {
  return int64_t(uint64_t(int64_t(t.tv_sec)) * 1000000000u + uint64_t(t.tv_nsec));
}

}  // namespace progcache
