// The headers NVRTC would read from disk for a program, found the way NVRTC finds them, so that
// their contents can be part of the key (docs/keys.md, "Headers on disk").
//
// The scan is conservative: it follows every #include, #include_next, #embed and __has_include
// regardless of #if (a needless dependency costs at worst a needless miss; a missed one would
// serve stale code), and records both the files found and the names probed that did not exist
// (creating a header earlier in the search path changes the key).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/key.hpp"
#include "util/memo_store.hpp"
#include "util/stat_identity.hpp"

namespace progcache {

struct IncludeScan {
  std::vector<HeaderDependency> dependencies;  // in the order they were found, each path once
  // Non-empty when the program must be compiled but not stored: a computed #include the scan
  // cannot resolve (without extra_digest), __DATE__/__TIME__/__TIMESTAMP__, an unreadable header.
  std::string uncacheable;
  bool time_macros = false;  // __DATE__, __TIME__ or __TIMESTAMP__ in the source or a header
};

// Scans program (its source, in-memory headers and options: -I, --include-path, -include,
// --pre-include, -no-source-include, in every spelling NVRTC accepts). Relative paths are taken
// from the current directory, as NVRTC takes them. File facts (digest and directives) are
// remembered per (path, stat identity) in this process and in memos (may be null); files
// changed in the last StatIdentity::kRacySeconds are always read. Throws only for running out
// of memory; unreadable files make the scan uncacheable.
IncludeScan scan_includes(const ProgramDesc &program, MemoStore *memos);

// True when every dependency still looks as the scan saw it (stat identity, or content for a
// file whose timestamps cannot be trusted; absent ones still absent). Called after a compile:
// a header edited while NVRTC ran makes the result unfit to store.
bool dependencies_unchanged(const IncludeScan &scan);

}  // namespace progcache
