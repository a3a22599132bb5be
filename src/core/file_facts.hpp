// What progcache needs to know of a header file NVRTC reads: the digest of its content, the
// directives the include scanner follows, and the lexical facts (time and path macros). Kept
// per (path, stat identity) in this process and in the cache's memos, so that a file whose stat
// vouches for it is never read twice (docs/keys.md, "Memos").
#pragma once

#include <sys/stat.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/directives.hpp"
#include "core/key.hpp"
#include "core/source_facts.hpp"
#include "util/beside.hpp"
#include "util/memo_store.hpp"
#include "util/stat_identity.hpp"

namespace progcache {

struct FileFacts {
  ContentDigest digest{};
  Directives directives;
  SourceFacts lexical;
};
using FactsPtr = std::shared_ptr<const FileFacts>;

// The facts of a text held in memory (a source, an in-memory header, a racy file's content).
FileFacts facts_of_text(std::string_view text);
// The same but for the digest, left zero: for a text the key holds whole already (a program's
// source, its in-memory headers), of which the include scan reads only the directives and the
// lexical facts (its digest was a second BLAKE2b of every source pcache_make_key keyed).
FileFacts scanned_facts_of_text(std::string_view text);

// A text's scan costs a fifth to a half of its BLAKE2b (docs/keys.md): from kScanBesideBytes,
// where this thread may run on two CPUs, it runs on a thread of its own while this one hashes
// (util/beside.hpp). Below, starting that thread (~33 us of the caller's time on a 2-core VM)
// costs more than the scan it would move. scanned_beside: scanned_facts_of_text(text) on a
// thread of its own while hash() runs on this one; both on this one where no thread can be had.
// The facts are the same either way.
constexpr size_t kScanBesideBytes = 256 * 1024;
bool scan_beside_pays(size_t text_size);
template <class Hash>
FileFacts scanned_beside(std::string_view text, Hash &&hash) {
  FileFacts f;
  run_beside([&] { f = scanned_facts_of_text(text); }, hash);
  return f;
}

// The facts of the regular file at path, which stat says is `seen`: from the memos when `seen`
// vouches for them (not racy), else read through a descriptor (and remembered when not racy).
// *now receives the identity of what was read (differs from seen when the file changed since).
// Null with *error set when the file cannot be read whole or is larger than 64 MiB.
FactsPtr facts_of_file(const std::string &path, const StatIdentity &seen, MemoStore *memos,
                       StatIdentity *now, std::string *error);

// Memo encodings, exposed for the fuzzer: decode(encode(f)) == f, and any damaged text decodes
// to nullopt.
std::string encode_file_facts(const FileFacts &facts);
std::optional<FileFacts> decode_file_facts(std::string_view text);

}  // namespace progcache
