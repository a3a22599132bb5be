// Little-endian integers, the byte order of every format progcache writes (entries, bundles,
// memos, compile metadata, key encodings), whatever the host.
#pragma once

#include <cstdint>
#include <string>

namespace progcache {

// The low n bytes of v at p, least significant first.
inline void store_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// n bytes at p, least significant first.
inline uint64_t load_le(const uint8_t *p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Appends the low n bytes of v to out.
inline void append_le(std::string &out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>(static_cast<uint8_t>(v >> (8 * i))));
}

}  // namespace progcache
