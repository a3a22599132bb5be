#include "owned_payload.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "util/spare_block.hpp"

namespace progcache::shim {
namespace {

// Every payload handed over is preceded by {capacity, check, magic, base}: its block's size
// and start, and a check that ties them to the payload's place in the block (a caller writing
// before its payload must not make a later use of the block overrun one it believes larger).
constexpr uint64_t kPayloadMagic = 0x70636163686523ull;  // "pcache#"
constexpr size_t kPayloadPrefix = 32;
// A copy of at least kAlignedCopyFrom bytes is placed at the source's offset within a 4 KiB
// page (a gap in front of the prefix, under kPageSize bytes). x86 CPUs copy a destination a
// few bytes to a few hundred bytes past the source's page offset many times slower (4 KiB
// aliasing; `rep movsb` on AMD Zen is 30x slower at 1-15 bytes), and where two blocks of a
// similar size land is the allocator's chance: a 4 KiB memory hit took 124 ns in one process
// and 363 ns in the next.
constexpr size_t kPageSize = 4096;
constexpr size_t kAlignedCopyFrom = 1024;

uint64_t block_check(const uint8_t *base, size_t capacity, size_t payload_offset) {
  return uint64_t(capacity) ^ uint64_t(reinterpret_cast<uintptr_t>(base)) ^
         (uint64_t(payload_offset) * 0x9e3779b97f4a7c15ull) ^ kPayloadMagic;
}

// payload lies in base's block of capacity bytes, at least kPayloadPrefix bytes into it.
uint8_t *with_prefix(uint8_t *payload, uint8_t *base, size_t capacity) {
  const uint64_t check = block_check(base, capacity, size_t(payload - base));
  std::memcpy(payload - 32, &capacity, 8);
  std::memcpy(payload - 24, &check, 8);
  std::memcpy(payload - 16, &kPayloadMagic, 8);
  std::memcpy(payload - 8, &base, sizeof base);
  return payload;
}

// Where in base's block a copy of payload starts: right after the prefix, or for a large one at
// the source's page offset.
size_t copy_offset(const uint8_t *base, ByteView payload) {
  if (payload.size < kAlignedCopyFrom) return kPayloadPrefix;
  const auto distance = reinterpret_cast<uintptr_t>(payload.data) -
                        reinterpret_cast<uintptr_t>(base + kPayloadPrefix);
  return kPayloadPrefix + distance % kPageSize;
}

}  // namespace

uint8_t *copy_payload(ByteView payload) noexcept {
  const size_t gap = payload.size < kAlignedCopyFrom ? 0 : kPageSize - 1;
  size_t capacity = 0;
  uint8_t *base = take_spare_block(kPayloadPrefix + gap + payload.size, &capacity);
  if (!base) return nullptr;
  uint8_t *out = base + copy_offset(base, payload);
  if (payload.size) std::memcpy(out, payload.data, payload.size);
  return with_prefix(out, base, capacity);
}

uint8_t *hand_over_payload(Hit &&hit, bool shared_records, size_t *size) {
  *size = hit.payload.size;
  // use_count() == 1 does not order other threads' last reads of a shared record before our
  // writes: those are copied. The prefix goes over the record's own entry header.
  const auto offset = static_cast<size_t>(hit.payload.data - hit.record->data());
  if (!shared_records && hit.record.use_count() == 1 && offset >= kPayloadPrefix) {
    uint8_t *payload = const_cast<uint8_t *>(hit.payload.data);  // sole owner, not const
    size_t capacity = 0;
    uint8_t *base = const_cast<Blob &>(*hit.record).release_block(&capacity);
    return with_prefix(payload, base, capacity);
  }
  uint8_t *copy = copy_payload(hit.payload);
  if (!copy) throw std::bad_alloc();
  return copy;
}

void release_payload(void *payload) noexcept {
  if (!payload) return;
  auto *p = static_cast<uint8_t *>(payload);
  uint64_t magic;
  std::memcpy(&magic, p - 16, 8);
  // Not from pcache_get (or freed twice): freeing it would corrupt the heap.
  if (magic != kPayloadMagic) std::abort();
  uint8_t *base;
  std::memcpy(&base, p - 8, sizeof base);
  std::memset(p - 16, 0, 8);
  size_t capacity;
  uint64_t check;
  std::memcpy(&capacity, p - 32, sizeof capacity);
  std::memcpy(&check, p - 24, sizeof check);
  // Anything else, the caller wrote over.
  if (base > p) std::abort();
  const auto offset = static_cast<size_t>(p - base);
  if (offset < kPayloadPrefix || offset > capacity || check != block_check(base, capacity, offset))
    std::abort();
  keep_spare_block(base, capacity);
}

}  // namespace progcache::shim
