// One spare heap block per thread, for the next short-lived block that fits in it: the block a
// hit's payload is read or copied into, which the caller frees with pcache_free soon after. A
// 4 KiB hit spent a fifth of its instructions in malloc and free (glibc's thread cache stops at
// 1 KiB), and a SQLite hit, whose read block alternates with SQLite's own, searched the bins.
#pragma once

#include <cstddef>
#include <cstdint>

namespace progcache {

// The largest block kept: a copy of up to 64 KiB with its 32-byte prefix and page-offset gap,
// or a record of that size with its entry header. None under AddressSanitizer, which should
// see every block freed (a use after free). Larger blocks go back to the allocator.
size_t max_spare_block();

// A malloc'd block of at least bytes: the calling thread's spare when it holds that many and
// not so many more that a caller who keeps the block would waste most of it; else a new one
// (nullptr when malloc fails). *capacity gets the block's size, to give back to
// keep_spare_block. Thread-safe (the spare is the thread's own).
uint8_t *take_spare_block(size_t bytes, size_t *capacity) noexcept;

// For a read whose size is known only after it (a file read before it is stat'ed): the calling
// thread's spare whatever its size, else a new block of fallback bytes (nullptr when malloc
// fails). *capacity gets the block's size. Once the read's size is known, a block that
// spare_too_large_for it should be shrunk before it is handed on.
uint8_t *take_any_spare_block(size_t fallback, size_t *capacity) noexcept;

// Whether a block of capacity bytes is more than take_spare_block hands out for bytes.
bool spare_too_large_for(size_t capacity, size_t bytes) noexcept;

// Takes back base, a block of capacity bytes from malloc (any thread's): it becomes the calling
// thread's spare in place of the last one, which is freed; or it is freed at once when it is
// larger than max_spare_block() or the thread is exiting. The thread's spare is freed when the
// thread exits. base may be nullptr.
void keep_spare_block(uint8_t *base, size_t capacity) noexcept;

}  // namespace progcache
