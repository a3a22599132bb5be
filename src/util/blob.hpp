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

// Owned bytes in one malloc'd block. The block has kPrefix spare bytes in front of data() so
// that the C API can hand a payload to the caller without copying it (see capi: pcache_free).
class Blob {
 public:
  static constexpr size_t kPrefix = 16;

  Blob() = default;
  explicit Blob(size_t size) : size_(size) {
    base_ = static_cast<uint8_t *>(std::malloc(kPrefix + (size ? size : 1)));
    if (!base_) throw std::bad_alloc();
  }
  static Blob copy_of(ByteView v) {
    Blob b(v.size);
    if (v.size) std::memcpy(b.data(), v.data, v.size);
    return b;
  }
  // Takes ownership of size bytes at block, a malloc'd block with no spare prefix (a reply
  // buffer another library allocated): saves copying a large value once more.
  static Blob adopt(uint8_t *block, size_t size) {
    Blob b;
    b.base_ = block;
    b.size_ = size;
    b.offset_ = 0;
    return b;
  }
  Blob(Blob &&o) noexcept : base_(o.base_), size_(o.size_), offset_(o.offset_) {
    o.base_ = nullptr;
    o.size_ = 0;
  }
  Blob &operator=(Blob &&o) noexcept {
    if (this != &o) {
      std::free(base_);
      base_ = o.base_;
      size_ = o.size_;
      offset_ = o.offset_;
      o.base_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  Blob(const Blob &) = delete;
  Blob &operator=(const Blob &) = delete;
  ~Blob() { std::free(base_); }

  uint8_t *data() { return base_ + offset_; }
  const uint8_t *data() const { return base_ + offset_; }
  size_t size() const { return size_; }
  ByteView view() const { return {data(), size_}; }
  // Shortens the blob to n <= size() bytes, returning the spare memory to the allocator.
  void shrink(size_t n) {
    if (n >= size_) return;
    if (auto *b = static_cast<uint8_t *>(std::realloc(base_, offset_ + (n ? n : 1)))) base_ = b;
    size_ = n;
  }
  // Gives up ownership of the whole block; the caller frees base with std::free.
  uint8_t *release_base() {
    uint8_t *b = base_;
    base_ = nullptr;
    size_ = 0;
    return b;
  }

 private:
  uint8_t *base_ = nullptr;
  size_t size_ = 0;
  size_t offset_ = kPrefix;  // where data() starts in the block
};

using SharedBlob = std::shared_ptr<const Blob>;

}  // namespace progcache
