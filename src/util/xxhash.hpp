// xxHash (XXH3: entry checksums, file names, small record checks), opened on first use like the
// other system libraries (util/system_library.hpp). Not linked: every object a process links sits
// in the scope that each later dlopen's symbol relocations search first, and libxxhash there cost
// the first key's loading of libcrypto and SQLite ~0.22M instructions (bench/analysis.md).
#pragma once

#include <xxhash.h>

#include "util/system_library.hpp"

// Every xxHash function progcache calls.
#define PCACHE_LIBXXHASH_FUNCTIONS(X) \
  X(XXH3_64bits)                      \
  X(XXH3_64bits_withSeed)             \
  X(XXH3_128bits)                     \
  X(XXH3_128bits_withSeed)            \
  X(XXH128_canonicalFromHash)

namespace progcache {

struct LibXxhash {
  PCACHE_LIBXXHASH_FUNCTIONS(PCACHE_SYSTEM_LIBRARY_MEMBER)
  // The run-time dispatched versions (AVX2 where the CPU has it) of the two that checksum whole
  // entries: the same hashes, about twice as fast over a large entry, where Debian's plain entry
  // points are built for SSE2. The plain ones where the library has no dispatched ones.
  decltype(&::XXH3_64bits) XXH3_64bits_fast = nullptr;
  decltype(&::XXH3_128bits_withSeed) XXH3_128bits_withSeed_fast = nullptr;
};

// libxxhash's functions, the library opened (by PCACHE_XXHASH_SONAME) and resolved on the first
// call and kept for the process. Throws Error(Status::unsupported) naming the library and what
// dlopen or dlsym said. Thread-safe; a fork() in another thread waits for a load under way.
const LibXxhash &libxxhash();

}  // namespace progcache
