// Little-endian integers, the byte order of every format progcache writes (entries, bundles,
// memos, compile metadata, key encodings), whatever the host.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>

namespace progcache {

// The low n (<= 8) bytes of v at p, least significant first.
inline void store_le(uint8_t *p, uint64_t v, int n) {
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &v, size_t(n));  // one store once inlined with a constant n
  } else {
    for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
  }
}

// n (<= 8) bytes at p, least significant first.
inline uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(&v, p, size_t(n));  // one load once inlined with a constant n
  } else {
    for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  }
  return v;
}

// Appends the low n bytes of v to out.
inline void append_le(std::string &out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(static_cast<uint8_t>(v >> (8 * i))));
}

}  // namespace progcache
