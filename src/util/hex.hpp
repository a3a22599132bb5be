// Lower-case hex, the one spelling of digests and keys in names, memos and messages.
#pragma once

#include <string>

#include "util/blob.hpp"

namespace progcache {

// Writes 2 * bytes.size digits at out (no terminating NUL).
inline void write_hex(ByteView bytes, char *out) {
  static constexpr char kDigits[] = "0123456789abcdef";
  for (size_t i = 0; i < bytes.size; ++i) {
    out[2 * i] = kDigits[bytes.data[i] >> 4];
    out[2 * i + 1] = kDigits[bytes.data[i] & 15];
  }
}

inline std::string to_hex(ByteView bytes) {
  std::string s(bytes.size * 2, '0');
  write_hex(bytes, s.data());
  return s;
}

}  // namespace progcache
