#include "owned_payload.hpp"

#include <cstdlib>
#include <cstring>
#include <utility>

namespace progcache::shim {
namespace {

constexpr uint64_t kOwnedMagic = 0x70636163686521ull;  // "pcache!"

uint8_t *hand_over(Blob &&block, size_t payload_offset) {
  uint8_t *payload = block.data() + payload_offset;
  uint8_t *base = block.release_base();
  std::memcpy(payload - 16, &kOwnedMagic, 8);
  std::memcpy(payload - 8, &base, sizeof base);
  return payload;
}

}  // namespace

uint8_t *hand_over_payload(Hit &&hit, bool shared_records, size_t *size) {
  *size = hit.payload.size;
  // use_count() == 1 does not order other threads' last reads of a shared record before our
  // writes: those are copied.
  if (!shared_records && hit.record.use_count() == 1) {
    const size_t offset = static_cast<size_t>(hit.payload.data - hit.record->data());
    auto &block = const_cast<Blob &>(*hit.record);  // sole owner; the object is not const
    return hand_over(std::move(block), offset);
  }
  return hand_over(Blob::copy_of(hit.payload), 0);
}

void release_payload(void *payload) noexcept {
  if (!payload) return;
  auto *p = static_cast<uint8_t *>(payload);
  uint64_t magic;
  std::memcpy(&magic, p - 16, 8);
  if (magic != kOwnedMagic) std::abort();  // not from pcache_get: freeing it would corrupt the heap
  uint8_t *base;
  std::memcpy(&base, p - 8, sizeof base);
  std::memset(p - 16, 0, 8);
  std::free(base);
}

}  // namespace progcache::shim
