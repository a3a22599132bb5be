// Lower-case hex, the one spelling of digests and keys in names, memos and messages.
#pragma once

#include <string>

#include "util/blob.hpp"

namespace progcache {

inline std::string to_hex(ByteView bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(bytes.size * 2, '0');
  for (size_t i = 0; i < bytes.size; ++i) {
    s[2 * i] = kDigits[bytes.data[i] >> 4];
    s[2 * i + 1] = kDigits[bytes.data[i] & 15];
  }
  return s;
}

}  // namespace progcache
