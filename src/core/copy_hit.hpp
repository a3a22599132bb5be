// Cache::copy_hit's definition: a memory store's hit copied by the caller's code, inlined into
// the store's lookup. Included only where a hit is copied this way (the C shim), so that the
// store's header stays out of everything else that includes core/cache.hpp.
#pragma once

#include "backends/memory_backend.hpp"
#include "core/cache.hpp"

namespace progcache {

template <typename Copy>
bool Cache::copy_hit(ByteView key, Copy &&copy) {
  check_key(key);
  auto use = [&copy](ByteView record, uint64_t payload_size) {
    copy(plain_entry_payload(record, payload_size));
  };
  if (memory_->use_in_place(key, use)) return true;
  misses_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

}  // namespace progcache
