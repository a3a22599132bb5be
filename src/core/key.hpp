// Cache keys: a program description -> canonical, tag-and-length encoded fields -> BLAKE2b.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cuda/program.hpp"
#include "util/blob.hpp"
#include "util/hex.hpp"
#include "util/stat_identity.hpp"

namespace progcache {

inline constexpr size_t kKeySize = 32;
using Key = std::array<uint8_t, kKeySize>;
using ContentDigest = std::array<uint8_t, 32>;

// One path NVRTC would probe for a header (see include_scan.hpp).
struct HeaderDependency {
  std::string path;  // as NVRTC composes it: "sub/h.h", "inc/x.h", "/abs/h.h"
  bool present = false;
  ContentDigest digest{};        // of the content, when present
  StatIdentity stat;             // as seen by the scan, when present
  bool recheck_content = false;  // changed too recently for its stat to vouch for it
};

// What a compile's key covers beyond the program's own fields (filled by the compile flow).
struct CompileContext {
  std::string nvrtc_build;                     // NvrtcIdentity::key_text()
  std::string working_dir;                     // hashed only when the output embeds it
  std::vector<HeaderDependency> dependencies;  // headers read from disk, and absent probes
};

// Rewrites NVRTC options to one spelling per meaning, merging only spellings NVRTC itself treats
// as the same ("-arch=sm_90", "-arch sm_90" -> "--gpu-architecture=sm_90", "-G" ->
// "--device-debug"); a spelling NVRTC rejects ("-std c++17" as two strings) is kept verbatim so
// that it never shares a key with one NVRTC accepts (tests/option_spellings_test.cpp asks NVRTC).
// Throws Error(invalid_arg) for options the key cannot account for (see docs/keys.md), unless
// has_extra_digest allows the PCH ones.
[[nodiscard]] std::vector<std::string> canonical_options(
    const std::vector<std::string_view> &options, bool has_extra_digest);

// True when NVRTC's output for these options embeds the working directory (line info, debug
// info: the DWARF compilation directory), so the key must cover it.
bool output_embeds_working_dir(const std::vector<std::string_view> &options);

// Derives the key; context (may be null, for pcache_make_key) adds the NVRTC build, the
// working directory and the headers on disk. Throws Error(invalid_arg) for refused inputs.
[[nodiscard]] Key derive_key(const ProgramDesc &program, const CompileContext *context = nullptr);

// The key's inputs one by one, for explaining a miss: ("source", digest), ("option[0]",
// "--gpu-architecture=sm_90"), ("header a.h", digest), ... Small fields are kept as text, large
// ones as a 128-bit digest. Throws like derive_key.
std::vector<std::pair<std::string, std::string>> key_fields(
    const ProgramDesc &program, const CompileContext *context = nullptr);

// "blake2b" or "sha256" (FIPS providers): which hash derive_key uses in this process.
const char *key_hash_name();

// BLAKE2b-256 (SHA-256 under FIPS) of bytes: what header contents are keyed by.
[[nodiscard]] ContentDigest content_digest(ByteView bytes);
// canonical_options of the program's options, computed on first use and kept in the program.
// Throws as canonical_options does.
const std::vector<std::string> &program_options(const ProgramDesc &program);
// content_digest of the program's source, computed on first use and kept in the program.
const ContentDigest &source_digest(const ProgramDesc &program);

}  // namespace progcache
