// The headers NVRTC would read from disk for a program, predicted without compiling it: found
// the way NVRTC finds them, so that pcache_make_key and `progcache deps` can key and list them
// (docs/keys.md, "Keys without a compile"). A compile keys what NVRTC was seen to read instead
// (core/observation.hpp).
//
// The scan is conservative: it follows every #include, #include_next, #embed and __has_include
// regardless of #if (a needless dependency costs at worst a needless miss; a missed one would
// serve stale code), and records both the files found and the names probed that did not exist
// (creating a header earlier in the search path changes the key). What it cannot predict (a
// computed #include, a __has_include operand built by macros, the time macros) makes the
// program unkeyable.
#pragma once

#include <string>
#include <vector>

#include "core/key.hpp"
#include "util/memo_store.hpp"
#include "util/stat_identity.hpp"

namespace progcache {

// One path NVRTC would probe for a header.
struct HeaderDependency {
  std::string path;        // as NVRTC composes it: "sub/h.h", "inc/x.h", "/abs/h.h"
  bool present = false;    // a regular file is there (read or not: see IncludeScan::uncacheable)
  ContentDigest digest{};  // of the content, when present and read (else zero)
  StatIdentity stat;       // as seen by the scan, when present
  bool recheck_content = false;  // changed too recently for its stat to vouch for it
};

struct IncludeScan {
  std::vector<HeaderDependency> dependencies;  // in the order they were found, each path once
  // Non-empty when the program cannot be keyed without compiling it: a computed #include the
  // scan cannot resolve (without extra_digest), __DATE__/__TIME__, an unreadable header.
  std::string uncacheable;
};

// Scans program (its source, in-memory headers and include options as program_options parses
// them). Relative paths are taken from the current directory, as NVRTC takes them. File facts
// come from core/file_facts.hpp's memos (may be null). Throws only for running out of memory
// or refused options; unreadable files make the scan uncacheable. PROGRAM_ID, where given, is
// program_digest(program): the scans this process kept are then found by it (pcache_make_key
// hashes the source once, for its key) instead of by a digest of the source of their own.
IncludeScan scan_includes(const ProgramDesc &program, MemoStore *memos,
                          const ContentDigest *program_id = nullptr);

// pcache_make_key's parts for a C++ program: its digest (program_digest_after(prefix,
// program.source)) and scan_includes(program, nullptr, &digest). A source the digest memo does
// not hold is scanned beside its hash where that pays (core/file_facts.hpp, scan_beside_pays).
// The result is the same either way. Throws like both.
struct DigestedScan {
  ContentDigest digest{};
  IncludeScan scan;
};
DigestedScan digest_and_scan_includes(std::string_view prefix, const ProgramDesc &program);

// The scan as key fields ("file PATH" -> digest or "absent"), for derive_key.
std::vector<KeyField> scan_fields(const IncludeScan &scan);

}  // namespace progcache
