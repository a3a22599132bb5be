// Cache keys: a program, parsed and validated once, -> canonical, tag-and-length encoded fields
// -> BLAKE2b. One walk over the fields both hashes them (derive_key) and renders them for
// `progcache explain` (key_fields), so the two can never disagree.
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

// A program's options as NVRTC reads them: one spelling per meaning, in an order NVRTC is shown
// to be indifferent to (tests/cuda/option_spellings_test.cpp asks NVRTC), and what they imply.
struct ParsedOptions {
  std::vector<std::string> canonical;
  std::vector<std::string> include_dirs;  // -I, in search order, as NVRTC composes paths
  std::vector<std::string> pre_includes;  // -include, in order
  bool no_source_include = false;
  bool pch = false;                    // -pch, --pch-dir, --use-pch: NVRTC's own header cache
  std::vector<std::string> pch_paths;  // --pch-dir and --use-pch values
  // Non-empty: an option whose effect reaches beyond the output (a file written, the GPU of this
  // machine): compiled, never stored. Names the option.
  std::string uncacheable;
  // LTO-IR or OptiX IR: LLVM bitcode, which holds the program name and the working directory in
  // a form a text search cannot find, so both are keyed whenever the output is bitcode.
  bool bitcode_output = false;
};

// Parses options. Spellings NVRTC treats alike become one ("-arch=sm_90", "-arch sm_90" ->
// "--gpu-architecture=sm_90"; "-I=dir", "-Idir/" -> "--include-path=dir"); a spelling NVRTC
// rejects ("-std c++17" as two strings) is kept verbatim so that it never shares a key with one
// it accepts. Repeated options that change nothing are dropped and options whose order NVRTC
// ignores are sorted, only when every option is one the table knows. Throws Error(invalid_arg)
// for an option missing its value.
[[nodiscard]] ParsedOptions parse_options(const std::vector<std::string_view> &options);
// parse_options(options).canonical (tests, the fuzzer and the admin API).
[[nodiscard]] std::vector<std::string> canonical_options(
    const std::vector<std::string_view> &options);

// The program's parsed options, computed on first use and kept in the program. Throws as
// parse_options does.
const ParsedOptions &program_options(const ProgramDesc &program);
// content_digest of the program's source, computed on first use and kept in the program.
const ContentDigest &source_digest(const ProgramDesc &program);
// Throws Error(invalid_arg) for an unknown code type or target, or a NULL source.
void check_program(const ProgramDesc &program);

// What a KeyField is: a header read, a path probed, a variable, a directory...
enum KeyFieldTag : uint8_t {
  kFieldRead = 0x40,  // a header's content (or why it could not be read)
  kFieldProbe,        // stat: absent, a file, a directory
  kFieldLinkProbe,    // lstat
  kFieldAccess,       // access(mode)
  kFieldList,         // a directory's names
  kFieldResolve,      // realpath / readlink
  kFieldSameFile,     // two paths NVRTC met are one file
  kFieldEnvironment,  // a variable NVRTC read during the compile
  kFieldName,         // the program name, where the output holds it
  kFieldNameDir,      // the directory of the program name, where NVRTC looked in it
  kFieldWorkingDir,   // getcwd and $PWD, where the output holds them
};

// One field a key covers beyond the program's own: a header found or probed, a variable of the
// environment, the directory. The name and `value` are hashed; `shown` is what explain prints.
struct KeyField {
  uint8_t tag = 0;
  std::string name;
  std::string value;
  std::string shown;
};

// The variables of the environment NVRTC reads when it loads or on its first compile (and keeps
// for the process): keyed always, with their values here (docs/keys.md lists them and how they
// were found). Variables NVRTC reads on every compile are keyed as observed.
const std::vector<std::string_view> &nvrtc_load_time_variables();
std::vector<KeyField> nvrtc_environment_fields();

// What a key covers beyond the program's own fields (filled by the compile flow, or by the include
// scan for pcache_make_key).
struct KeyContext {
  std::string nvrtc_build;            // NvrtcIdentity::key_text(); "" = program.nvrtc_version
  bool name_in_identity = true;       // false: the program name is keyed only as `fields` say
  std::vector<KeyField> environment;  // nvrtc_environment_fields()
  std::vector<KeyField> fields;       // headers, probes, variables, directories (in order)
};

// The key of the program's identity alone (every field but `fields`): what a compile's
// observations are filed under (core/observation.hpp). Never equal to an entry's key.
[[nodiscard]] Key identity_key(const ProgramDesc &program, const KeyContext &context);

// Every field identity_key hashes, tag-and-length encoded in the order it hashes them, with the
// source's own bytes (as a last field) in place of its digest: programs whose encodings are equal
// have one identity in every process, so the encoding can stand for the identity where no digest is
// at hand (core/identity_memo.hpp). Needs no libcrypto for C++ programs (the only ones it is used
// for). Throws as identity_key does.
[[nodiscard]] std::string identity_encoding(const ProgramDesc &program, const KeyContext &context);
// The schema tag identities are hashed under in this process (loads libcrypto), and whether s is
// one that some process hashes them under (BLAKE2b's, or SHA-256's under a FIPS provider).
[[nodiscard]] std::string_view identity_schema();
[[nodiscard]] bool is_identity_schema(std::string_view s);

// Whether this process has its key hash at hand, so that a digest costs only its hashing:
// libcrypto is mapped already (progcache or the host loaded it), or $OPENSSL_CONF names a
// configuration (whose verdicts on every digest OpenSSL is then left to give), or a test hook
// chooses the digest. False in a fresh process, whose first digest loads libcrypto.
[[nodiscard]] bool key_hash_at_hand();

// Derives the key; context (may be null, for a key of the program alone) adds the NVRTC build,
// the environment and the fields. Throws Error(invalid_arg) for refused inputs.
[[nodiscard]] Key derive_key(const ProgramDesc &program, const KeyContext *context = nullptr);

// pcache_make_key's keys (schema 5; never a compile's key, which names the exact NVRTC build).
// program_digest: the program's fields (derive_key's, without a context) and then its source, in
// one digest, so that a small source costs about its own BLAKE2b: program_prefix's bytes (the
// schema and the digest of the fields, kept per thread for the next program with equal fields;
// the view is valid until the thread's next program_prefix), then the source
// (program_digest_after: the process's memo of large sources keyed before, else
// hashed_program_digest, which always hashes and tells the memo). standalone_key: that digest
// where READS (the include scan's fields) is empty, else a digest of it and of READS. All throw
// Error(invalid_arg) for refused inputs and Error(internal) if OpenSSL fails. Thread-safe.
[[nodiscard]] ContentDigest program_digest(const ProgramDesc &program);
[[nodiscard]] std::string_view program_prefix(const ProgramDesc &program);
[[nodiscard]] ContentDigest program_digest_after(std::string_view prefix, ByteView source);
[[nodiscard]] ContentDigest hashed_program_digest(std::string_view prefix, ByteView source);
[[nodiscard]] Key standalone_key(const ContentDigest &program, const std::vector<KeyField> &reads);

// The key's inputs one by one, for explaining a miss: ("source", digest), ("option[0]",
// "--gpu-architecture=sm_90"), ("file inc/a.h", digest), ... Large ones shown as a digest.
// Throws like derive_key.
std::vector<std::pair<std::string, std::string>> key_fields(const ProgramDesc &program,
                                                            const KeyContext *context = nullptr);

// "blake2b" or "sha256" (FIPS providers): which hash derive_key uses in this process.
const char *key_hash_name();

// Whether that hash is called straight from OpenSSL's default provider (util/openssl_digest.hpp)
// rather than fetched: the same bytes either way; tests and diagnostics tell the two apart.
bool key_hash_from_default_provider();

// BLAKE2b-256 (SHA-256 under FIPS) of bytes: what header contents are keyed by.
[[nodiscard]] ContentDigest content_digest(ByteView bytes);

}  // namespace progcache
