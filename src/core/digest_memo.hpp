// The digests of large programs this process keyed more than once, found by their exact bytes.
//
// BLAKE2b runs at about a gigabyte a second, and a caller that keys the same kernel on every
// request (a JIT framework looks its program's key up each time it is asked for the kernel)
// hashed the same megabyte again on each. A digest is served from here only when the bytes
// before the source (the schema and the digest of the program's fields) and every byte of the
// source equal those it was computed from, compared in full, so it is the digest the hash gives.
// A source is copied in at its second sight: the first leaves only its digest among the last 32
// seen, so a source keyed once costs no copy and no hash beyond the one it always cost.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "core/key.hpp"

namespace progcache {

class ProgramDigestMemo {
 public:
  // Sources kept: from kMinSource bytes (a smaller one's digest costs about a lookup) to
  // kMaxSource, kMaxKeptBytes of them in all (the least recently used go first).
  static constexpr size_t kMinSource = 16 * 1024, kMaxSource = 4 << 20, kMaxKeptBytes = 16 << 20;

  // The digest of prefix followed by source, when a copy of both is kept; nullopt otherwise.
  std::optional<ContentDigest> find(std::string_view prefix, ByteView source);
  // digest, just computed for prefix and source: a copy is kept at the source's second sight.
  void note(std::string_view prefix, ByteView source, const ContentDigest &digest);

  size_t kept_bytes();  // the sources' bytes kept (tests)
  void clear();         // forgets everything (tests)
};

// The process's memo, used by program_digest_after. Thread-safe; fork-safe.
ProgramDigestMemo &program_digest_memo();

}  // namespace progcache
