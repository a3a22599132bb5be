#include "core/key.hpp"

#include <openssl/evp.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "util/endian.hpp"
#include "util/env.hpp"
#include "util/error.hpp"

namespace progcache {
namespace {

// Key schema: bump when the encoding below changes, so old entries become unreachable.
// 3: the source enters as its digest (hashed once per call, shared with the include manifest).
constexpr std::string_view kSchemaBlake2 = "progcache-key/3/blake2b-512/256";
constexpr std::string_view kSchemaSha256 = "progcache-key/3/sha256";

enum class OptKind { plain, needs_digest, refused };

struct OptSpec {
  // string_views, so that matching compares lengths first and never runs strlen (it did, for
  // every spelling of every option on every key: a third of pcache_make_key's time).
  std::string_view canonical;   // long spelling, with its two dashes
  std::string_view short_form;  // empty if none
  bool takes_value;
  bool value_attaches;  // "-DNAME": the short form may carry its value with no separator
  OptKind kind;
  bool separate_value = true;  // NVRTC accepts the value as the next string ("-arch sm_90")
};

// NVRTC's options (nvrtc docs, "Supported Compile Options"); both spellings of each.
constexpr OptSpec kOptions[] = {
    {"--gpu-architecture", "-arch", true, false, OptKind::plain},
    {"--device-c", "-dc", false, false, OptKind::plain},
    {"--device-w", "-dw", false, false, OptKind::plain},
    {"--relocatable-device-code", "-rdc", true, false, OptKind::plain},
    {"--extensible-whole-program", "-ewp", false, false, OptKind::plain},
    {"--device-debug", "-G", false, false, OptKind::plain},
    {"--generate-line-info", "-lineinfo", false, false, OptKind::plain},
    {"--dopt", "-dopt", true, false, OptKind::plain},
    {"--ptxas-options", "-Xptxas", true, false, OptKind::plain},
    {"--maxrregcount", "-maxrregcount", true, false, OptKind::plain},
    {"--ftz", "-ftz", true, false, OptKind::plain},
    {"--prec-sqrt", "-prec-sqrt", true, false, OptKind::plain},
    {"--prec-div", "-prec-div", true, false, OptKind::plain},
    {"--fmad", "-fmad", true, false, OptKind::plain},
    {"--use_fast_math", "-use_fast_math", false, false, OptKind::plain},
    {"--extra-device-vectorization", "-extra-device-vectorization", false, false, OptKind::plain},
    {"--modify-stack-limit", "-modify-stack-limit", true, false, OptKind::plain},
    {"--dlink-time-opt", "-dlto", false, false, OptKind::plain},
    {"--gen-opt-lto", "-gen-opt-lto", false, false, OptKind::plain},
    {"--optix-ir", "-optix-ir", false, false, OptKind::plain},
    {"--jump-table-density", "-jtd", true, false, OptKind::plain},
    {"--device-stack-protector", "-device-stack-protector", true, false, OptKind::plain},
    {"--define-macro", "-D", true, true, OptKind::plain},
    {"--undefine-macro", "-U", true, true, OptKind::plain},
    {"--include-path", "-I", true, true, OptKind::plain},
    {"--pre-include", "-include", true, false, OptKind::plain},
    {"--no-source-include", "-no-source-include", false, false, OptKind::plain},
    {"--std", "-std", true, false, OptKind::plain, false},
    {"--builtin-move-forward", "-builtin-move-forward", true, false, OptKind::plain},
    {"--builtin-initializer-list", "-builtin-initializer-list", true, false, OptKind::plain},
    {"--disable-warnings", "-w", false, false, OptKind::plain},
    {"--restrict", "-restrict", false, false, OptKind::plain},
    {"--device-as-default-execution-space", "-default-device", false, false, OptKind::plain},
    {"--device-int128", "-device-int128", false, false, OptKind::plain},
    {"--optimization-info", "-opt-info", true, false, OptKind::plain, false},
    {"--display-error-number", "-err-no", false, false, OptKind::plain},
    {"--no-display-error-number", "-no-err-no", false, false, OptKind::plain},
    {"--diag-error", "-diag-error", true, false, OptKind::plain},
    {"--diag-suppress", "-diag-suppress", true, false, OptKind::plain},
    {"--diag-warn", "-diag-warn", true, false, OptKind::plain},
    {"--brief-diagnostics", "-brief-diag", true, false, OptKind::plain},
    {"--split-compile", "-split-compile", true, false, OptKind::plain},
    {"--fdevice-syntax-only", "-fdevice-syntax-only", false, false, OptKind::plain},
    {"--minimal", "-minimal", false, false, OptKind::plain},
    {"--no-cache", "-no-cache", false, false, OptKind::plain},
    {"--pch-verbose", "-pch-verbose", true, false, OptKind::plain},
    {"--pch-messages", "-pch-messages", true, false, OptKind::plain},
    {"--instantiate-templates-in-pch", "-instantiate-templates-in-pch", true, false,
     OptKind::plain},
    {"--pch", "-pch", false, false, OptKind::needs_digest},
    {"--use-pch", "-use-pch", true, false, OptKind::needs_digest},
    {"--pch-dir", "-pch-dir", true, false, OptKind::needs_digest},
    {"--create-pch", "-create-pch", true, false, OptKind::refused},
    {"--time", "-time", true, false, OptKind::refused},
    {"--fdevice-time-trace", "-fdevice-time-trace", true, false, OptKind::refused},
};

struct Match {
  const OptSpec *spec = nullptr;
  std::optional<std::string_view> value;  // set when the value was inside this string
  bool merge = true;  // false: a spelling whose meaning NVRTC has not shown equal to the others
};

// Every spelling, for matching in one lookup instead of a walk of the table.
struct OptionIndex {
  std::unordered_map<std::string_view, std::pair<const OptSpec *, bool>> by_spelling;  // is short
  std::vector<std::pair<std::string_view, const OptSpec *>> attaching;  // "-D", "-U", "-I"
};

const OptionIndex &option_index() {
  static const OptionIndex index = [] {
    OptionIndex i;
    for (const OptSpec &s : kOptions) {
      i.by_spelling.emplace(s.canonical, std::pair{&s, false});  // the first spec keeps a spelling
      if (!s.short_form.empty()) i.by_spelling.emplace(s.short_form, std::pair{&s, true});
      if (s.value_attaches && !s.short_form.empty()) i.attaching.emplace_back(s.short_form, &s);
    }
    return i;
  }();
  return index;
}

Match match_option(std::string_view opt) {
  const OptionIndex &index = option_index();
  if (auto it = index.by_spelling.find(opt); it != index.by_spelling.end())
    return {it->second.first, std::nullopt};
  if (const size_t eq = opt.find('='); eq != std::string_view::npos) {
    auto it = index.by_spelling.find(opt.substr(0, eq));
    if (it != index.by_spelling.end() && it->second.first->takes_value) {
      const OptSpec *spec = it->second.first;
      // "-D=X" may mean X or "=X": kept apart from "--define-macro=X" and "-DX".
      return {spec, opt.substr(eq + 1), !(spec->value_attaches && it->second.second)};
    }
  }
  for (const auto &[spelling, spec] : index.attaching)
    if (opt.size() > spelling.size() && opt.substr(0, spelling.size()) == spelling)
      return {spec, opt.substr(spelling.size())};
  return {};
}

// Digest contexts kept per thread for reuse: allocating and cleansing one per key was a fixed
// cost of every key. A few, since a Hasher may be live while another hashes a field.
class DigestContextPool {
 public:
  ~DigestContextPool() {
    for (EVP_MD_CTX *c : free_) EVP_MD_CTX_free(c);
  }
  EVP_MD_CTX *take() {
    if (free_.empty()) return EVP_MD_CTX_new();
    EVP_MD_CTX *c = free_.back();
    free_.pop_back();
    return c;
  }
  void give_back(EVP_MD_CTX *c) {
    if (free_.size() < 4) {
      free_.push_back(c);
    } else {
      EVP_MD_CTX_free(c);
    }
  }
  static DigestContextPool &this_thread() {
    thread_local DigestContextPool pool;
    return pool;
  }

 private:
  std::vector<EVP_MD_CTX *> free_;
};

class Hasher {
 public:
  explicit Hasher(bool with_schema = true) : ctx_(DigestContextPool::this_thread().take()) {
    if (!ctx_) throw std::bad_alloc();
    const Algo &a = algo();
    if (EVP_DigestInit_ex2(ctx_.get(), a.md, nullptr) != 1)
      throw Error(Status::internal, "OpenSSL digest init failed");
    if (with_schema) field(0, a.schema);
  }
  // Small fields are gathered and handed to OpenSSL together: a digest update per tag, length
  // and value cost more than the hashing itself for a key's dozens of short fields.
  void raw(const void *d, size_t n) {
    if (pending_ + n <= sizeof buffer_) {
      std::memcpy(buffer_ + pending_, d, n);
      pending_ += n;
      return;
    }
    flush();
    update(d, n);
  }
  void u64(uint64_t v) {
    uint8_t b[8];
    store_le(b, v, 8);
    raw(b, 8);
  }
  // Tag + length prefix: no two different field sequences produce the same byte stream.
  void field(uint8_t tag, ByteView v) {
    raw(&tag, 1);
    u64(v.size);
    raw(v.data, v.size);
  }
  void number(uint8_t tag, uint64_t v) {
    raw(&tag, 1);
    u64(8);
    u64(v);
  }
  Key finish() {
    flush();
    uint8_t out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(ctx_.get(), out, &n) != 1 || n < kKeySize)
      throw Error(Status::internal, "OpenSSL digest final failed");
    Key k;
    std::memcpy(k.data(), out, kKeySize);
    return k;
  }

  struct Algo {
    EVP_MD *md = nullptr;
    std::string_view schema;
    const char *name = "";
  };
  // Fetched once per process. FIPS providers have no BLAKE2b: fall back to SHA-256 under a
  // distinct schema tag so the two kinds of key can never be equal.
  static const Algo &algo() {
    static const Algo a = [] {
      Algo r;
      r.md = EVP_MD_fetch(nullptr, "BLAKE2B-512", nullptr);
      r.schema = kSchemaBlake2;
      r.name = "blake2b";
      if (!r.md || trusted_env("PCACHE_TEST_FORCE_SHA256")) {
        if (r.md) EVP_MD_free(r.md);
        r.md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
        r.schema = kSchemaSha256;
        r.name = "sha256";
      }
      return r;
    }();
    if (!a.md) throw Error(Status::internal, "OpenSSL provides neither BLAKE2b-512 nor SHA-256");
    return a;
  }

 private:
  struct CtxFree {
    void operator()(EVP_MD_CTX *c) const { DigestContextPool::this_thread().give_back(c); }
  };
  void update(const void *d, size_t n) {
    if (n && EVP_DigestUpdate(ctx_.get(), d, n) != 1)
      throw Error(Status::internal, "OpenSSL digest update failed");
  }
  void flush() {
    update(buffer_, pending_);
    pending_ = 0;
  }
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx_;
  uint8_t buffer_[512];
  size_t pending_ = 0;
};

enum Tag : uint8_t {
  kTagName = 1,
  kTagCodeType,
  kTagTarget,
  kTagNvrtcVersion,
  kTagSource,
  kTagOptionCount,
  kTagOption,
  kTagHeaderCount,
  kTagHeaderName,
  kTagHeaderSource,
  kTagNameExprCount,
  kTagNameExpr,
  kTagExtraDigest,
  kTagNoExtraDigest,
  kTagNvrtcBuild,
  kTagWorkingDir,
  kTagDependencyCount,
  kTagDependencyPath,
  kTagDependencyDigest,
  kTagDependencyAbsent,
};

}  // namespace

std::vector<std::string> canonical_options(const std::vector<std::string_view> &options,
                                           bool has_extra_digest) {
  std::vector<std::string> out;
  out.reserve(options.size());
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string_view opt = options[i];
    const Match m = match_option(opt);
    if (!m.spec) {  // unknown to us: kept verbatim (a different spelling only costs a miss)
      out.emplace_back(opt);
      continue;
    }
    if (m.spec->kind == OptKind::refused)
      throw Error(Status::invalid_arg,
                  "option '" + std::string(opt) +
                      "' has side effects outside the compile output and cannot be cached");
    if (m.spec->kind == OptKind::needs_digest && !has_extra_digest)
      throw Error(Status::invalid_arg,
                  "option '" + std::string(opt) +
                      "' makes NVRTC read files the cache key cannot see; pass extra_digest (a "
                      "fingerprint of those files) to cache this program");
    if (!m.spec->takes_value) {
      out.emplace_back(m.spec->canonical);
      continue;
    }
    if (!m.value) {  // the value is the next string
      if (i + 1 >= options.size())
        throw Error(Status::invalid_arg, "option '" + std::string(opt) + "' needs a value");
      const std::string_view value = options[++i];
      if (m.spec->separate_value) {
        out.push_back(std::string(m.spec->canonical) + "=" + std::string(value));
      } else {  // NVRTC rejects this form: it must never share a key with one it accepts
        out.emplace_back(opt);
        out.emplace_back(value);
      }
      continue;
    }
    out.push_back(m.merge ? std::string(m.spec->canonical) + "=" + std::string(*m.value)
                          : std::string(opt));
  }
  return out;
}

bool output_embeds_working_dir(const std::vector<std::string_view> &options) {
  for (size_t i = 0; i < options.size(); ++i) {
    const Match m = match_option(options[i]);
    if (!m.spec) return true;  // an option we do not know might
    const std::string_view name = m.spec->canonical;
    // Line and debug info carry the DWARF compilation directory; ptxas and -dopt options may
    // ask for them too.
    if (name == "--device-debug" || name == "--generate-line-info" || name == "--ptxas-options" ||
        name == "--dopt")
      return true;
    if (m.spec->takes_value && !m.value) ++i;
  }
  return false;
}

namespace {

void check_program(const ProgramDesc &p) {
  if (p.code_type < CodeType::cxx || p.code_type > CodeType::nvvm)
    throw Error(Status::invalid_arg, "unknown code_type " + std::to_string(int(p.code_type)));
  if (p.target < Target::cubin || p.target > Target::nvrtc_outputs)
    throw Error(Status::invalid_arg, "unknown target " + std::to_string(int(p.target)));
  if (!p.source.data) throw Error(Status::invalid_arg, "program source is NULL");
}

}  // namespace

Key derive_key(const ProgramDesc &p, const CompileContext *context) {
  check_program(p);
  const bool digest = p.extra_digest.has_value();
  const std::vector<std::string> &opts = program_options(p);

  Hasher h;
  h.field(kTagName, p.name);
  h.number(kTagCodeType, static_cast<uint64_t>(p.code_type));
  h.number(kTagTarget, static_cast<uint64_t>(p.target));
  if (context && !context->nvrtc_build.empty())
    h.field(kTagNvrtcBuild, context->nvrtc_build);
  else
    h.number(kTagNvrtcVersion, p.nvrtc_version);
  const ContentDigest &source = source_digest(p);
  h.field(kTagSource, ByteView(source.data(), source.size()));
  h.number(kTagOptionCount, opts.size());
  for (const std::string &o : opts) h.field(kTagOption, o);

  // Headers and name expressions are sets to NVRTC: their order must not change the key.
  auto headers = p.headers;
  std::stable_sort(headers.begin(), headers.end());
  h.number(kTagHeaderCount, headers.size());
  for (const auto &[name, text] : headers) {
    h.field(kTagHeaderName, name);
    h.field(kTagHeaderSource, text);
  }
  auto exprs = p.name_expressions;
  std::sort(exprs.begin(), exprs.end());
  h.number(kTagNameExprCount, exprs.size());
  for (std::string_view e : exprs) h.field(kTagNameExpr, e);
  if (digest)
    h.field(kTagExtraDigest, *p.extra_digest);
  else
    h.number(kTagNoExtraDigest, 0);
  if (context) {
    if (output_embeds_working_dir(p.options)) h.field(kTagWorkingDir, context->working_dir);
    // In scan order: the order NVRTC would meet them, itself decided by the contents hashed.
    h.number(kTagDependencyCount, context->dependencies.size());
    for (const HeaderDependency &d : context->dependencies) {
      h.field(kTagDependencyPath, d.path);
      if (d.present)
        h.field(kTagDependencyDigest, ByteView(d.digest.data(), d.digest.size()));
      else
        h.number(kTagDependencyAbsent, 0);
    }
  }
  return h.finish();
}

ContentDigest content_digest(ByteView bytes) {
  Hasher h(false);
  h.raw(bytes.data, bytes.size);
  const Key k = h.finish();
  ContentDigest d;
  std::memcpy(d.data(), k.data(), d.size());
  return d;
}

const std::vector<std::string> &program_options(const ProgramDesc &program) {
  if (!program.canonical_options)
    program.canonical_options =
        canonical_options(program.options, program.extra_digest.has_value());
  return *program.canonical_options;
}

const ContentDigest &source_digest(const ProgramDesc &program) {
  if (!program.source_digest) program.source_digest = content_digest(program.source);
  return *program.source_digest;
}

std::vector<std::pair<std::string, std::string>> key_fields(const ProgramDesc &p,
                                                            const CompileContext *context) {
  auto digest = [](ByteView v) {
    const XXH128_hash_t h = XXH3_128bits(v.data, v.size);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    return to_hex(ByteView(c.digest, sizeof c.digest));
  };
  static const char *const kCodeTypes[] = {"c++", "ptx", "nvvm"};
  static const char *const kTargets[] = {"cubin", "ptx", "ltoir", "nvrtc"};
  std::vector<std::pair<std::string, std::string>> f;
  f.emplace_back("name", std::string(p.name));
  f.emplace_back("code_type", kCodeTypes[int(p.code_type) % 3]);
  f.emplace_back("target", kTargets[int(p.target) % 4]);
  if (context && !context->nvrtc_build.empty())
    f.emplace_back("nvrtc_build", context->nvrtc_build);
  else
    f.emplace_back("nvrtc_version", std::to_string(p.nvrtc_version));
  f.emplace_back("source", digest(p.source));
  const auto &opts = program_options(p);
  f.emplace_back("options", std::to_string(opts.size()));
  for (size_t i = 0; i < opts.size(); ++i)
    f.emplace_back("option[" + std::to_string(i) + "]", opts[i]);
  auto headers = p.headers;
  std::stable_sort(headers.begin(), headers.end());
  f.emplace_back("headers", std::to_string(headers.size()));
  for (const auto &[name, text] : headers)
    f.emplace_back("header " + std::string(name), digest(text));
  auto exprs = p.name_expressions;
  std::sort(exprs.begin(), exprs.end());
  std::string joined;
  for (std::string_view e : exprs)
    joined += std::string(joined.empty() ? "" : ", ") + std::string(e);
  f.emplace_back("name_expressions", joined);
  f.emplace_back("extra_digest", p.extra_digest ? digest(*p.extra_digest) : "none");
  if (context) {
    if (output_embeds_working_dir(p.options)) f.emplace_back("working_dir", context->working_dir);
    for (const HeaderDependency &d : context->dependencies)
      f.emplace_back("file " + d.path,
                     d.present ? to_hex(ByteView(d.digest.data(), d.digest.size())) : "absent");
  }
  return f;
}

const char *key_hash_name() {
  return Hasher::algo().name;
}

}  // namespace progcache
