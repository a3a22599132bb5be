#include "util/spare_block.hpp"

#include <cstdlib>
#include <utility>

#include "util/thread_state.hpp"

namespace progcache {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr size_t kMaxSpare = 0;
#else
constexpr size_t kMaxSpare = 32 + 4096 - 1 + 64 * 1024;
#endif

// A spare taken for a block of bytes holds at most this much more: a 64 KiB spare does not go
// to a 100-byte record that its caller may keep for long.
constexpr size_t max_capacity_for(size_t bytes) {
  return 2 * bytes + 8 * 1024;
}

// Trivially destructible, so it outlives every destructor the thread runs: a keep_spare_block
// from a thread_local destroyed after SpareReleaser finds it closed and frees at once. (Closing
// in the spare's own destructor would not do: stores into an object whose lifetime ends are
// dead, and GCC drops them.)
struct Spare {
  uint8_t *base = nullptr;
  size_t capacity = 0;
  bool closed = false;
  bool releaser_armed = false;  // arm_releaser ran in this thread
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

// Constructs the thread's SpareReleaser, so that it runs at the thread's exit. Out of line and
// called once per thread: a block-scope thread_local in keep_spare_block cost every call its
// guard's own thread-local lookups.
[[gnu::noinline]] void arm_releaser() noexcept {
  thread_local SpareReleaser releaser;
  (void)releaser;
}

}  // namespace

size_t max_spare_block() {
  return kMaxSpare;
}

uint8_t *take_spare_block(size_t bytes, size_t *capacity) noexcept {
  Spare &spare = *this_thread(t_spare);
  if (spare.base && spare.capacity >= bytes && !spare_too_large_for(spare.capacity, bytes)) {
    *capacity = spare.capacity;
    return std::exchange(spare.base, nullptr);
  }
  *capacity = bytes;
  return static_cast<uint8_t *>(std::malloc(bytes));
}

uint8_t *take_any_spare_block(size_t fallback, size_t *capacity) noexcept {
  Spare &spare = *this_thread(t_spare);
  if (spare.base) {
    *capacity = spare.capacity;
    return std::exchange(spare.base, nullptr);
  }
  *capacity = fallback;
  return static_cast<uint8_t *>(std::malloc(fallback));
}

bool spare_too_large_for(size_t capacity, size_t bytes) noexcept {
  return capacity > max_capacity_for(bytes);
}

void keep_spare_block(uint8_t *base, size_t capacity) noexcept {
  if (!base) return;  // nothing to keep: the spare stays
  Spare &spare = *this_thread(t_spare);
  if (spare.closed || capacity > kMaxSpare) return std::free(base);
  if (!spare.releaser_armed) {  // the thread's first kept block
    arm_releaser();
    spare.releaser_armed = true;
  }
  if (spare.base) std::free(spare.base);  // none after a take: no call
  spare.base = base;
  spare.capacity = capacity;
}

}  // namespace progcache
