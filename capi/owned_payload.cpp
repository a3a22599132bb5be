#include "owned_payload.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

namespace progcache::shim {
namespace {

constexpr uint64_t kOwnedMagic = 0x70636163686521ull;  // "pcache!"
// A copy this file made into a block of its own layout: {capacity, check, gap, magic, base,
// payload}, where check ties the capacity and the payload's place to the block (a caller writing
// before its payload must not make a later copy overrun a block it believes larger).
constexpr uint64_t kCopyMagic = 0x70636163686522ull;
constexpr size_t kCopyPrefix = 32;
// A copy of at least kAlignedCopyFrom bytes is placed at the source's offset within a 4 KiB
// page (the gap above, under kPageSize bytes). x86 CPUs copy a destination a few bytes to a few
// hundred bytes past the source's page offset many times slower (4 KiB aliasing; `rep movsb`
// on AMD Zen is 30x slower at 1-15 bytes), and where two blocks of a similar size land is the
// allocator's chance: a 4 KiB memory hit took 124 ns in one process and 363 ns in the next.
constexpr size_t kPageSize = 4096;
constexpr size_t kAlignedCopyFrom = 1024;

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kMaxSpare = 0;  // AddressSanitizer sees every block freed, and a use after free
#else
// A block that holds a copy of up to 64 KiB, its prefix and its page-offset gap.
constexpr size_t kMaxSpare = kCopyPrefix + kPageSize - 1 + 64 * 1024;
#endif

// The copy block this thread released last (pcache_free), kept for its next copied payload: a
// 4 KiB memory hit spent a fifth of its instructions in malloc and free (glibc's thread cache
// stops at 1 KiB). One block of at most kMaxSpare bytes per thread, freed when the thread exits.
// Trivially destructible, so it outlives every destructor the thread runs: a pcache_free from a
// thread_local destroyed after SpareReleaser finds it closed and frees at once. (Closing in the
// spare's own destructor would not do: stores into an object whose lifetime ends are dead, and
// GCC drops them.)
struct Spare {
  uint8_t *base = nullptr;
  size_t capacity = 0;
  bool closed = false;
};
thread_local Spare t_spare;

struct SpareReleaser {
  SpareReleaser() = default;
  SpareReleaser(const SpareReleaser &) = delete;
  SpareReleaser &operator=(const SpareReleaser &) = delete;
  ~SpareReleaser() {
    std::free(std::exchange(t_spare.base, nullptr));
    t_spare.closed = true;
  }
};

// A block of at least bytes: the spare when it is that large, else a new one (nullptr if the
// allocation fails). *capacity gets its size.
uint8_t *take_block(size_t bytes, size_t *capacity) {
  if (t_spare.base && t_spare.capacity >= bytes) {
    *capacity = t_spare.capacity;
    return std::exchange(t_spare.base, nullptr);
  }
  *capacity = bytes;
  return static_cast<uint8_t *>(std::malloc(bytes));
}

// Keeps base (a block of capacity bytes) as the spare in place of the last one, or frees it.
void keep_block(uint8_t *base, size_t capacity) {
  if (t_spare.closed || capacity > kMaxSpare) return std::free(base);
  thread_local SpareReleaser releaser;  // constructed by the thread's first kept block
  std::free(t_spare.base);
  t_spare.base = base;
  t_spare.capacity = capacity;
}

uint64_t capacity_check(const uint8_t *base, size_t capacity, size_t payload_offset) {
  return uint64_t(capacity) ^ uint64_t(reinterpret_cast<uintptr_t>(base)) ^
         (uint64_t(payload_offset) << 48) ^ kCopyMagic;
}

void write_header(uint8_t *payload, uint64_t magic, uint8_t *base) {
  std::memcpy(payload - 16, &magic, 8);
  std::memcpy(payload - 8, &base, sizeof base);
}

// Where in base's block a copy of payload starts: right after the prefix, or for a large one at
// the source's page offset.
size_t copy_offset(const uint8_t *base, ByteView payload) {
  if (payload.size < kAlignedCopyFrom) return kCopyPrefix;
  const auto distance =
      reinterpret_cast<uintptr_t>(payload.data) - reinterpret_cast<uintptr_t>(base + kCopyPrefix);
  return kCopyPrefix + distance % kPageSize;
}

// A copy of payload in a block of the copy layout (a thread's spare when one fits).
uint8_t *hand_over_copy(ByteView payload) {
  const size_t gap = payload.size < kAlignedCopyFrom ? 0 : kPageSize - 1;
  size_t capacity = 0;
  uint8_t *base = take_block(kCopyPrefix + gap + payload.size, &capacity);
  if (!base) throw std::bad_alloc();
  const size_t offset = copy_offset(base, payload);
  const uint64_t check = capacity_check(base, capacity, offset);
  std::memcpy(base, &capacity, sizeof capacity);
  std::memcpy(base + 8, &check, sizeof check);
  uint8_t *out = base + offset;
  if (payload.size) std::memcpy(out, payload.data, payload.size);
  write_header(out, kCopyMagic, base);
  return out;
}

uint8_t *hand_over(Blob &&block, size_t payload_offset) {
  uint8_t *payload = block.data() + payload_offset;
  write_header(payload, kOwnedMagic, block.release_base());
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
  return hand_over_copy(hit.payload);
}

void release_payload(void *payload) noexcept {
  if (!payload) return;
  auto *p = static_cast<uint8_t *>(payload);
  uint64_t magic;
  std::memcpy(&magic, p - 16, 8);
  // Not from pcache_get (or freed twice): freeing it would corrupt the heap.
  if (magic != kOwnedMagic && magic != kCopyMagic) std::abort();
  uint8_t *base;
  std::memcpy(&base, p - 8, sizeof base);
  std::memset(p - 16, 0, 8);
  if (magic == kOwnedMagic) return std::free(base);
  size_t capacity;
  uint64_t check;
  // A copy starts kCopyPrefix to kCopyPrefix + kPageSize - 1 bytes into its block; anything
  // else, the caller wrote over.
  const auto offset =
      static_cast<size_t>(reinterpret_cast<uintptr_t>(p) - reinterpret_cast<uintptr_t>(base));
  if (base > p || offset < kCopyPrefix || offset >= kCopyPrefix + kPageSize) std::abort();
  std::memcpy(&capacity, base, sizeof capacity);
  std::memcpy(&check, base + 8, sizeof check);
  if (check != capacity_check(base, capacity, offset)) std::abort();
  keep_block(base, capacity);
}

}  // namespace progcache::shim
