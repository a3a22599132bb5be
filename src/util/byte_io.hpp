// Reading and writing the little-endian, length-prefixed encodings progcache keeps beside its
// entries (memos, manifests). The reader is libgit2's parse-context idea: one cursor whose
// every read is bounds-checked, and which stays failed after the first short read, so a decoder
// checks once at the end instead of after each field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "util/endian.hpp"

namespace progcache {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(char(v)); }
  void u32(uint32_t v) { append_le(out_, v, 4); }
  void u64(uint64_t v) { append_le(out_, v, 8); }
  void bytes(std::string_view v) { out_.append(v.data(), v.size()); }
  // LEB128: seven bits a byte, least significant first (small numbers take one byte).
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  // A u32 length, then the bytes.
  void str(std::string_view v) {
    u32(uint32_t(v.size()));
    bytes(v);
  }
  const std::string &data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view in) : in_(in) {}
  // n bytes, or "" (and failed from now on) when fewer remain.
  std::string_view bytes(size_t n) {
    if (failed_ || n > in_.size() - at_) {
      failed_ = true;
      return {};
    }
    at_ += n;
    return in_.substr(at_ - n, n);
  }
  // Everything not yet read.
  std::string_view rest() { return bytes(failed_ ? 0 : in_.size() - at_); }
  uint8_t u8() { return uint8_t(number(1)); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const std::string_view b = bytes(1);
      if (failed_) return 0;
      v |= uint64_t(uint8_t(b[0]) & 0x7f) << shift;
      if (!(uint8_t(b[0]) & 0x80)) return v;
    }
    failed_ = true;  // more than ten bytes: not one of ours
    return 0;
  }
  uint32_t u32() { return uint32_t(number(4)); }
  uint64_t u64() { return number(8); }
  // A u32 length, then that many bytes (at most max).
  std::string_view str(size_t max = SIZE_MAX) {
    const uint32_t n = u32();
    if (n > max) failed_ = true;
    return bytes(failed_ ? 0 : n);
  }
  // A count about to be read that many times, each taking at least min_each bytes: refused
  // (failed) when the rest of the input could not hold them, so a damaged count never makes a
  // decoder allocate or loop for nothing.
  uint32_t count(size_t min_each) {
    const uint32_t n = u32();
    if (min_each && n > (in_.size() - at_) / min_each) failed_ = true;
    return failed_ ? 0 : n;
  }
  void fail() { failed_ = true; }
  bool failed() const { return failed_; }
  // Everything read, nothing left over, no read failed.
  bool done() const { return !failed_ && at_ == in_.size(); }

 private:
  uint64_t number(int n) {
    const std::string_view b = bytes(size_t(n));
    return failed_ ? 0 : load_le(reinterpret_cast<const uint8_t *>(b.data()), n);
  }
  std::string_view in_;
  size_t at_ = 0;
  bool failed_ = false;
};

}  // namespace progcache
