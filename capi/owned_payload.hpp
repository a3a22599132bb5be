// The C caller's allocation contract for pcache_get and pcache_free: a payload is handed over
// inside the malloc'd block that holds it, preceded by {block size, check, magic, block base},
// so that pcache_free finds the start and size of the block whatever the payload's offset, and
// refuses a pointer that never came from pcache_get or that the caller wrote in front of.
// pcache_free keeps a block of up to 64 KiB as the thread's spare (util/spare_block.hpp) for
// the next copy or record read, instead of freeing it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/cache.hpp"

namespace progcache::shim {

// The hit's payload as a block the caller frees with release_payload. A record read from storage
// is ours alone and is handed over without copying; one that a memory store shares with other
// threads (shared_records) is copied. *size gets the payload's size.
uint8_t *hand_over_payload(Hit &&hit, bool shared_records, size_t *size);

// A copy of payload in a block handed over like hand_over_payload's, or nullptr when no memory
// is left (never throws: it runs while a memory store holds the record, Cache::copy_hit).
uint8_t *copy_payload(ByteView payload) noexcept;

// Frees a payload hand_over_payload or copy_payload returned (NULL ok); aborts on any other
// pointer, since freeing it would corrupt the heap.
void release_payload(void *payload) noexcept;

}  // namespace progcache::shim
