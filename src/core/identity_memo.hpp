// A program's identity (core/key.hpp: identity_key) without a digest, for a process that has
// none at hand yet. A fresh process's compile hit needs one digest before its first lookup, the
// identity, and that digest loaded libcrypto: ~0.6 ms, a fifth of the whole process
// (docs/performance.md). Everything after it is found without hashing (the observations filed
// under the identity, whose stat identities vouch for the headers, and the entry keys stored
// with them).
//
// The memo holds the exact bytes the identity covers (identity_encoding: the source itself, not
// its digest) and the identity a process hashed from them, filed under the bytes' XXH3-128. It
// is believed only when its bytes equal the program's, byte for byte: the XXH3 only finds it, so
// no crafted program can be given another's identity, and two programs whose hashes collide
// cost each other the memo, never the key. Like every memo it is checksummed, bound to its name
// and signed with the cache's secret when the cache has one (docs/security.md).
#pragma once

#include <cstddef>
#include <optional>

#include "core/key.hpp"
#include "util/memo_store.hpp"

namespace progcache {

// Programs a process finds by memo before it loads libcrypto after all: a memo read costs ~10x
// a small program's digest once libcrypto is loaded, so a process that compiles many programs
// is better off paying the load once. And the largest encoding kept: memos are bounded in
// number, not bytes (backend.hpp: kMaxMetaRecords).
inline constexpr size_t kIdentityMemoPrograms = 32;
inline constexpr size_t kMaxIdentityMemoBytes = 32 * 1024;

struct FoundIdentity {
  Key identity{};
  enum class From {
    digest,        // hashed: this process had its digest at hand, or the program is not memoised
    memo,          // recalled from its memo
    memo_missing,  // hashed where a memo was looked for and none held these bytes
  } from = From::digest;
};

// The identity of program in context. From its memo where the process has no digest at hand
// (key_hash_at_hand), the program is C++ and among the process's first kIdentityMemoPrograms
// looked for, and its encoding is at most kMaxIdentityMemoBytes; otherwise, or where no memo holds
// its bytes, hashed. memos may be null. Throws as identity_key does.
[[nodiscard]] FoundIdentity find_identity(MemoStore *memos, const ProgramDesc &program,
                                          const KeyContext &context);

// The identity that the memo of program's encoding holds, where one holds exactly these bytes
// and its record parses (find_identity without its conditions; tests).
[[nodiscard]] std::optional<Key> recall_identity(MemoStore *memos, const ProgramDesc &program,
                                                 const KeyContext &context);

// Files identity, which this process hashed (identity_key) for program in context, as the memo of
// program's encoding, unless the encoding is larger than kMaxIdentityMemoBytes. Best effort, as
// memos are.
void remember_identity(MemoStore *memos, const ProgramDesc &program, const KeyContext &context,
                       const Key &identity);

}  // namespace progcache
