// Byte views and an owned, malloc-backed byte buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <string_view>

#include "util/spare_block.hpp"

namespace progcache {

// A non-owning view of bytes (keys, payloads, records).
struct ByteView {
  const uint8_t *data = nullptr;
  size_t size = 0;

  ByteView() = default;
  ByteView(const void *d, size_t n) : data(static_cast<const uint8_t *>(d)), size(n) {}
  ByteView(std::string_view s) : ByteView(s.data(), s.size()) {}    // NOLINT: implicit on purpose
  ByteView(const std::string &s) : ByteView(s.data(), s.size()) {}  // NOLINT
  std::string_view str() const { return {reinterpret_cast<const char *>(data), size}; }
  bool operator==(const ByteView &o) const {
    return size == o.size && (size == 0 || std::memcmp(data, o.data, size) == 0);
  }
};

// Owned bytes in one malloc'd block, which the C API can hand over to its caller whole
// (release_block; see capi/owned_payload.hpp).
class Blob {
 public:
  Blob() = default;
  explicit Blob(size_t size) : size_(size), capacity_(size ? size : 1) {
    base_ = static_cast<uint8_t *>(std::malloc(capacity_));
    if (!base_) throw std::bad_alloc();
  }
  // A blob for a record read from storage to be handed on and freed soon (a hit): in the
  // calling thread's spare block when one fits (util/spare_block.hpp), else a new one.
  static Blob for_read(size_t size) {
    Blob b;
    b.size_ = size;
    b.base_ = take_spare_block(size ? size : 1, &b.capacity_);
    if (!b.base_) throw std::bad_alloc();
    return b;
  }
  // The same for a record whose size the read will tell (take_any_spare_block): size() is the
  // block's whole capacity until fit_read.
  static Blob for_unsized_read(size_t fallback) {
    Blob b;
    b.base_ = take_any_spare_block(fallback, &b.capacity_);
    if (!b.base_) throw std::bad_alloc();
    b.size_ = b.capacity_;
    return b;
  }
  // Sets the size of a for_unsized_read blob to the n <= size() bytes read into it, shrinking a
  // block much larger than that (a caller may keep the record long).
  void fit_read(size_t n) {
    if (spare_too_large_for(capacity_, n)) return shrink(n);
    size_ = n;
  }
  static Blob copy_of(ByteView v) {
    Blob b(v.size);
    if (v.size) std::memcpy(b.data(), v.data, v.size);
    return b;
  }
  // Takes ownership of size bytes at block, a malloc'd block (a reply buffer another library
  // allocated): saves copying a large value once more.
  static Blob adopt(uint8_t *block, size_t size) {
    Blob b;
    b.base_ = block;
    b.size_ = size;
    b.capacity_ = size;  // at least: the other library's block may be larger
    return b;
  }
  Blob(Blob &&o) noexcept
      : base_(o.base_),
        size_(o.size_),
        capacity_(o.capacity_),
        record_token_(o.record_token_),
        vouched_(o.vouched_) {
    o.base_ = nullptr;
    o.size_ = 0;
  }
  Blob &operator=(Blob &&o) noexcept {
    if (this != &o) {
      std::free(base_);
      base_ = o.base_;
      size_ = o.size_;
      capacity_ = o.capacity_;
      record_token_ = o.record_token_;
      vouched_ = o.vouched_;
      o.base_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  Blob(const Blob &) = delete;
  Blob &operator=(const Blob &) = delete;
  ~Blob() { std::free(base_); }

  uint8_t *data() { return base_; }
  const uint8_t *data() const { return base_; }
  size_t size() const { return size_; }
  ByteView view() const { return {data(), size_}; }
  // Shortens the blob to n <= size() bytes, returning the spare memory to the allocator.
  void shrink(size_t n) {
    if (n >= size_) return;
    const size_t capacity = n ? n : 1;
    if (auto *b = static_cast<uint8_t *>(std::realloc(base_, capacity))) {
      base_ = b;
      capacity_ = capacity;
    }
    size_ = n;
  }
  // For a record a store read for a hit: its token (util/verified_records.hpp; 0: none), and
  // whether the store vouches that the same stored bytes were found intact already, so that
  // hashing them again would only cost time (Backend::note_intact).
  uint64_t record_token() const { return record_token_; }
  bool vouched() const { return vouched_; }
  void set_record_token(uint64_t token, bool vouched) {
    record_token_ = token;
    vouched_ = vouched;
  }
  // Gives up ownership of the whole block, of *capacity bytes; the caller frees it with
  // std::free or keep_spare_block.
  uint8_t *release_block(size_t *capacity) {
    *capacity = capacity_;
    uint8_t *b = base_;
    base_ = nullptr;
    size_ = 0;
    return b;
  }

 private:
  uint8_t *base_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;  // the block's size in bytes
  uint64_t record_token_ = 0;
  bool vouched_ = false;
};

using SharedBlob = std::shared_ptr<const Blob>;

}  // namespace progcache
