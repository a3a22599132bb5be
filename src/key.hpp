// Cache keys: a program description -> canonical, tag-and-length encoded fields -> BLAKE2b.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "blob.hpp"

namespace progcache {

inline constexpr size_t kKeySize = 32;
using Key = std::array<uint8_t, kKeySize>;

enum class CodeType : int32_t { cxx = 0, ptx = 1, nvvm = 2 };
enum class Target : int32_t { cubin = 0, ptx = 1, ltoir = 2 };

struct ProgramDesc {
  std::string_view name = "default_program";
  CodeType code_type = CodeType::cxx;
  Target target = Target::cubin;
  uint32_t nvrtc_version = 0;
  ByteView source;
  std::vector<std::string_view> options;
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::vector<std::string_view> name_expressions;
  std::optional<ByteView> extra_digest;
};

// Rewrites NVRTC options to one spelling per meaning ("-arch sm_90" -> "--gpu-architecture=sm_90").
// Throws Error(invalid_arg) for options the key cannot account for (see docs/keys.md), unless
// has_extra_digest allows the file-reading ones.
std::vector<std::string> canonical_options(const std::vector<std::string_view> &options,
                                           bool has_extra_digest);

// Derives the key. Throws Error(invalid_arg) for refused inputs.
Key derive_key(const ProgramDesc &program);

// The key's inputs one by one, for explaining a miss: ("source", digest), ("option[0]",
// "--gpu-architecture=sm_90"), ("header a.h", digest), ... Small fields are kept as text, large
// ones as a 128-bit digest. Throws like derive_key.
std::vector<std::pair<std::string, std::string>> key_fields(const ProgramDesc &program);

// "blake2b" or "sha256" (FIPS providers): which hash derive_key uses in this process.
const char *key_hash_name();

// Lower-case hex of bytes.
std::string to_hex(ByteView bytes);

}  // namespace progcache
