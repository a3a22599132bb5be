#include "core/key.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/digest_memo.hpp"
#include "util/endian.hpp"
#include "util/env.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/libcrypto.hpp"
#include "util/openssl_digest.hpp"
#include "util/openssl_init.hpp"
#include "util/test_hooks.hpp"
#include "util/thread_state.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

// Key schema: bump when the encoding below changes, so old entries become unreachable.
// 4: compiles keyed by what NVRTC was seen to read (core/observation.hpp); failed compiles
//    stored; options reordered and deduplicated where NVRTC is indifferent.
constexpr std::string_view kSchemaBlake2 = "progcache-key/4/blake2b-512/256";
constexpr std::string_view kSchemaSha256 = "progcache-key/4/sha256";
// What observations are filed under: a different schema, so never an entry's key.
constexpr std::string_view kIdentityBlake2 = "progcache-identity/4/blake2b-512/256";
constexpr std::string_view kIdentitySha256 = "progcache-identity/4/sha256";
// pcache_make_key's keys (never a compile's: it knows no NVRTC build), since 0.5: the program's
// fields first and its source last, in one digest (schema 4 digested the source on its own and
// keyed that digest, two digests where one does: bench/analysis.md); where the include scan found
// files read, the key is a second digest of the program's and of those.
constexpr std::string_view kProgramBlake2 = "progcache-program/5/blake2b-512/256";
constexpr std::string_view kProgramSha256 = "progcache-program/5/sha256";
constexpr std::string_view kReadsBlake2 = "progcache-key/5/reads/blake2b-512/256";
constexpr std::string_view kReadsSha256 = "progcache-key/5/reads/sha256";

// How NVRTC treats an option's repetitions and what else it implies.
enum class OptKind {
  plain,    // a flag or a setting: repeating it with the same value changes nothing
  list,     // its values accumulate in order (-include, -Xptxas): every repetition counts
  search,   // -I: searched in order, each time named (with "-Ia -Ia", #include_next from a/x.h
            // finds a/x.h again, which #pragma once then skips: repetitions count too)
  macro,    // -D / -U: grouped by macro name
  pch,      // NVRTC's own precompiled-header cache: never changes the output
  effects,  // writes files beside the output: compiled, never stored
};

struct OptSpec {
  // string_views, so that matching compares lengths first and never runs strlen (it did, for
  // every spelling of every option on every key: a third of pcache_make_key's time).
  std::string_view canonical;   // long spelling, with its two dashes
  std::string_view short_form;  // empty if none
  bool takes_value;
  bool value_attaches;  // "-DNAME": the short form may carry its value with no separator
  OptKind kind;
  // Options in one group may override each other, so their relative order is kept; groups are
  // independent of each other and sorted. Empty: a group of its own.
  std::string_view group = {};
  bool separate_value = true;  // NVRTC accepts the value as the next string ("-arch sm_90")
};

// NVRTC's options (nvrtc docs, "Supported Compile Options"); both spellings of each.
constexpr OptSpec kOptions[] = {
    {"--gpu-architecture", "-arch", true, false, OptKind::plain},
    {"--device-c", "-dc", false, false, OptKind::plain, "relocatable"},
    {"--device-w", "-dw", false, false, OptKind::plain, "relocatable"},
    {"--relocatable-device-code", "-rdc", true, false, OptKind::plain, "relocatable"},
    {"--extensible-whole-program", "-ewp", false, false, OptKind::plain, "relocatable"},
    {"--device-debug", "-G", false, false, OptKind::plain, "debug"},
    {"--generate-line-info", "-lineinfo", false, false, OptKind::plain, "debug"},
    {"--dopt", "-dopt", true, false, OptKind::plain, "debug"},
    {"--ptxas-options", "-Xptxas", true, false, OptKind::list},
    {"--maxrregcount", "-maxrregcount", true, false, OptKind::plain},
    {"--ftz", "-ftz", true, false, OptKind::plain, "math"},
    {"--prec-sqrt", "-prec-sqrt", true, false, OptKind::plain, "math"},
    {"--prec-div", "-prec-div", true, false, OptKind::plain, "math"},
    {"--fmad", "-fmad", true, false, OptKind::plain, "math"},
    {"--use_fast_math", "-use_fast_math", false, false, OptKind::plain, "math"},
    {"--extra-device-vectorization", "-extra-device-vectorization", false, false, OptKind::plain},
    {"--modify-stack-limit", "-modify-stack-limit", true, false, OptKind::plain},
    {"--dlink-time-opt", "-dlto", false, false, OptKind::plain, "output"},
    {"--gen-opt-lto", "-gen-opt-lto", false, false, OptKind::plain, "output"},
    {"--optix-ir", "-optix-ir", false, false, OptKind::plain, "output"},
    {"--jump-table-density", "-jtd", true, false, OptKind::plain},
    {"--device-stack-protector", "-device-stack-protector", true, false, OptKind::plain},
    {"--define-macro", "-D", true, true, OptKind::macro},
    {"--undefine-macro", "-U", true, true, OptKind::macro},
    {"--include-path", "-I", true, true, OptKind::search, "search"},
    {"--pre-include", "-include", true, false, OptKind::list, "search"},
    {"--no-source-include", "-no-source-include", false, false, OptKind::plain, "search"},
    {"--std", "-std", true, false, OptKind::plain, {}, false},
    {"--builtin-move-forward", "-builtin-move-forward", true, false, OptKind::plain},
    {"--builtin-initializer-list", "-builtin-initializer-list", true, false, OptKind::plain},
    {"--disable-warnings", "-w", false, false, OptKind::plain, "diagnostics"},
    {"--restrict", "-restrict", false, false, OptKind::plain},
    {"--device-as-default-execution-space", "-default-device", false, false, OptKind::plain},
    {"--device-int128", "-device-int128", false, false, OptKind::plain},
    {"--optimization-info", "-opt-info", true, false, OptKind::list, {}, false},
    {"--display-error-number", "-err-no", false, false, OptKind::plain, "diagnostics"},
    {"--no-display-error-number", "-no-err-no", false, false, OptKind::plain, "diagnostics"},
    {"--diag-error", "-diag-error", true, false, OptKind::list, "diagnostics"},
    {"--diag-suppress", "-diag-suppress", true, false, OptKind::list, "diagnostics"},
    {"--diag-warn", "-diag-warn", true, false, OptKind::list, "diagnostics"},
    {"--brief-diagnostics", "-brief-diag", true, false, OptKind::plain, "diagnostics"},
    {"--split-compile", "-split-compile", true, false, OptKind::plain},
    {"--fdevice-syntax-only", "-fdevice-syntax-only", false, false, OptKind::plain, "output"},
    {"--minimal", "-minimal", false, false, OptKind::plain},
    {"--no-cache", "-no-cache", false, false, OptKind::plain},
    {"--pch-verbose", "-pch-verbose", true, false, OptKind::pch, "pch"},
    {"--pch-messages", "-pch-messages", true, false, OptKind::pch, "pch"},
    {"--instantiate-templates-in-pch", "-instantiate-templates-in-pch", true, false, OptKind::pch,
     "pch"},
    {"--pch", "-pch", false, false, OptKind::pch, "pch"},
    {"--use-pch", "-use-pch", true, false, OptKind::pch, "pch"},
    {"--pch-dir", "-pch-dir", true, false, OptKind::pch, "pch"},
    {"--create-pch", "-create-pch", true, false, OptKind::effects, "pch"},
    {"--time", "-time", true, false, OptKind::effects},
    {"--fdevice-time-trace", "-fdevice-time-trace", true, false, OptKind::effects},
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
      // "-D=X" may mean X or "=X": kept apart from "--define-macro=X" and "-DX". "-I=dir" is
      // "dir" to NVRTC (it probes dir/h.h): merged.
      const bool ambiguous =
          spec->value_attaches && it->second.second && spec->kind != OptKind::search;
      return {spec, opt.substr(eq + 1), !ambiguous};
    }
  }
  for (const auto &[spelling, spec] : index.attaching)
    if (opt.size() > spelling.size() && opt.substr(0, spelling.size()) == spelling)
      return {spec, opt.substr(spelling.size())};
  return {};
}

// An include directory as NVRTC composes paths with it: "inc/" and "inc" both give "inc/h.h".
std::string search_dir(std::string_view dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  return std::string(dir);
}

// One option as parsed: its canonical text and where it sorts.
struct Item {
  std::string text;
  const OptSpec *spec = nullptr;  // null: unknown, or a spelling kept verbatim
  std::string group;              // sort key; options of one group keep their order
};

std::string group_of(const OptSpec &spec, std::string_view value) {
  if (spec.kind == OptKind::macro) {  // -DNAME=V, -UNAME: one group per macro name
    const size_t eq = value.find('=');
    std::string_view name = value.substr(0, eq);
    if (const size_t paren = name.find('('); paren != std::string_view::npos)
      name = name.substr(0, paren);
    return "macro " + std::string(name);
  }
  return std::string(spec.group.empty() ? spec.canonical : spec.group);
}

// Repetitions that change nothing are dropped (within a group, the same option right after
// itself), and groups are sorted: NVRTC parses options into settings, so the order of
// independent ones cannot matter (tests/cuda/option_spellings_test.cpp shows it does not).
std::vector<std::string> normalized_order(std::vector<Item> items) {
  std::stable_sort(items.begin(), items.end(),
                   [](const Item &a, const Item &b) { return a.group < b.group; });
  std::vector<std::string> out;
  for (size_t i = 0; i < items.size(); ++i) {
    const bool repeats =
        i > 0 && items[i].group == items[i - 1].group && items[i].text == items[i - 1].text &&
        items[i].spec->kind != OptKind::list && items[i].spec->kind != OptKind::search;
    if (!repeats) out.push_back(items[i].text);
  }
  return out;
}

void note_meaning(const OptSpec &spec, std::string_view value, ParsedOptions *p) {
  const std::string_view name = spec.canonical;
  if (name == "--include-path") p->include_dirs.push_back(search_dir(value));
  if (name == "--pre-include") p->pre_includes.emplace_back(value);
  if (name == "--no-source-include") p->no_source_include = true;
  if (spec.kind == OptKind::pch) p->pch = true;
  if (name == "--pch-dir" || name == "--use-pch") p->pch_paths.emplace_back(value);
  if (spec.kind == OptKind::effects && p->uncacheable.empty())
    p->uncacheable = "option " + std::string(name) + " writes files beside the output";
  if (name == "--gpu-architecture" && value == "native" && p->uncacheable.empty())
    p->uncacheable = "--gpu-architecture=native depends on the GPU of the machine compiling";
  if (name == "--dlink-time-opt" || name == "--optix-ir" || name == "--gen-opt-lto")
    p->bitcode_output = true;
}

}  // namespace

ParsedOptions parse_options(const std::vector<std::string_view> &options) {
  ParsedOptions parsed;
  std::vector<Item> items;
  bool all_known = true;
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string_view opt = options[i];
    const Match m = match_option(opt);
    if (!m.spec) {  // unknown to us: kept verbatim (a different spelling only costs a miss)
      items.push_back({std::string(opt), nullptr, ""});
      all_known = false;
      continue;
    }
    const OptSpec &spec = *m.spec;
    if (!spec.takes_value) {
      note_meaning(spec, {}, &parsed);
      items.push_back({std::string(spec.canonical), &spec, group_of(spec, {})});
      continue;
    }
    std::string_view value;
    if (m.value) {
      value = *m.value;
      if (!m.merge) {
        items.push_back({std::string(opt), nullptr, ""});
        all_known = false;
        note_meaning(spec, value, &parsed);
        continue;
      }
    } else {
      if (i + 1 >= options.size())
        throw Error(Status::invalid_arg, "option '" + std::string(opt) + "' needs a value");
      value = options[++i];
      if (!spec.separate_value) {  // NVRTC rejects this form: it must never share a key
        items.push_back({std::string(opt), nullptr, ""});
        items.push_back({std::string(value), nullptr, ""});
        all_known = false;
        continue;
      }
    }
    note_meaning(spec, value, &parsed);
    const std::string v = spec.kind == OptKind::search ? search_dir(value) : std::string(value);
    items.push_back({std::string(spec.canonical) + "=" + v, &spec, group_of(spec, v)});
  }
  if (all_known) {
    parsed.canonical = normalized_order(std::move(items));
  } else {
    for (Item &item : items) parsed.canonical.push_back(std::move(item.text));
  }
  return parsed;
}

std::vector<std::string> canonical_options(const std::vector<std::string_view> &options) {
  return parse_options(options).canonical;
}

namespace {

struct Algo {
  DigestOps ops;
  std::string_view schema, identity_schema, program_schema, reads_schema;
  const char *name = "";
  bool from_default_provider = false;
};

// Chosen once per process: BLAKE2b-512 straight from OpenSSL's default provider where nothing in
// the process could refuse it (util/openssl_digest.hpp), else fetched. FIPS providers have no
// BLAKE2b: fall back to SHA-256 under a distinct schema tag so the two kinds of key can never
// be equal.
const Algo &algo() {
  static constinit Algo a;
  static constinit bool chosen = false;
  static constinit ForkSafeOnce once;  // not a static's guard: util/fork_guard.hpp
  once.run([] {
    const bool config_loaded = init_openssl();
    const LibCrypto &crypto = libcrypto();
    Algo r;
    r.schema = kSchemaBlake2;
    r.identity_schema = kIdentityBlake2;
    r.program_schema = kProgramBlake2;
    r.reads_schema = kReadsBlake2;
    r.name = "blake2b";
    std::optional<DigestOps> direct;
    if (!config_loaded && !test_hooks::force_sha256() && !test_hooks::fetch_digests())
      direct = default_provider_digest("BLAKE2B-512");
    EVP_MD *md = direct ? nullptr : crypto.EVP_MD_fetch(nullptr, "BLAKE2B-512", nullptr);
    if (!direct && (!md || test_hooks::force_sha256())) {
      if (md) crypto.EVP_MD_free(md);
      md = crypto.EVP_MD_fetch(nullptr, "SHA256", nullptr);
      r.schema = kSchemaSha256;
      r.identity_schema = kIdentitySha256;
      r.program_schema = kProgramSha256;
      r.reads_schema = kReadsSha256;
      r.name = "sha256";
    }
    if (!direct && !md) return;  // kept for the process otherwise, as the contexts need it
    r.ops = direct ? *direct : evp_digest_ops(md);
    r.from_default_provider = direct.has_value();
    a = r;
    chosen = true;
  });
  if (!chosen) throw Error(Status::internal, "OpenSSL provides neither BLAKE2b-512 nor SHA-256");
  return a;
}

// Digest contexts kept per thread for reuse: allocating and cleansing one per key was a fixed
// cost of every key. A few, since a Hasher may be live while another hashes a field.
class DigestContextPool {
 public:
  ~DigestContextPool() {
    for (void *c : free_) algo().ops.freectx(c);
  }
  void *take() {
    if (free_.empty()) return algo().ops.newctx(algo().ops.provctx);
    void *c = free_.back();
    free_.pop_back();
    return c;
  }
  void give_back(void *c) {
    if (free_.size() < 4) {
      free_.push_back(c);
    } else {
      algo().ops.freectx(c);
    }
  }

 private:
  std::vector<void *> free_;
};

DigestContextPool &thread_digest_pool();  // the thread's KeyThread's, below

// A field as keys encode it: tag, length, value, so that no two different field sequences give
// the same bytes. SINK has raw(data, size).
template <typename Sink>
void encode_field(Sink &sink, uint8_t tag, ByteView v) {
  uint8_t head[9];
  head[0] = tag;
  store_le(head + 1, v.size, 8);
  sink.raw(head, sizeof head);
  sink.raw(v.data, v.size);
}

// A sink for encode_field that appends to a string.
struct AppendTo {
  std::string &out;
  void raw(const void *d, size_t n) { out.append(static_cast<const char *>(d), n); }
};

class Hasher {
 public:
  Hasher() : Hasher(thread_digest_pool()) {}
  // With the thread's pool at hand (a thread-local lookup fewer on each side of a digest).
  explicit Hasher(DigestContextPool &pool) : ops_(algo().ops), ctx_(pool.take(), CtxFree{&pool}) {
    if (!ctx_) throw Error(Status::internal, "OpenSSL could not make a digest context");
    if (ops_.init(ctx_.get(), nullptr) != 1)
      throw Error(Status::internal, "OpenSSL digest init failed");
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
  void field(uint8_t tag, ByteView v) { encode_field(*this, tag, v); }
  Key finish() {
    flush();
    uint8_t out[EVP_MAX_MD_SIZE];
    size_t n = 0;
    if (ops_.final(ctx_.get(), out, &n, sizeof out) != 1 || n < kKeySize)
      throw Error(Status::internal, "OpenSSL digest final failed");
    Key k;
    std::memcpy(k.data(), out, kKeySize);
    return k;
  }

 private:
  struct CtxFree {
    DigestContextPool *pool;
    void operator()(void *c) const { pool->give_back(c); }
  };
  void update(const void *d, size_t n) {
    if (n && ops_.update(ctx_.get(), static_cast<const unsigned char *>(d), n) != 1)
      throw Error(Status::internal, "OpenSSL digest update failed");
  }
  void flush() {
    update(buffer_, pending_);
    pending_ = 0;
  }
  const DigestOps &ops_;
  std::unique_ptr<void, CtxFree> ctx_;
  uint8_t buffer_[512];
  size_t pending_ = 0;
};

enum Tag : uint8_t {
  kTagSchema = 0,
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
  kTagEnvironment,
  kTagFieldCount,
  kTagLinkInputCount,  // since schema 4's link step: appended, so no earlier tag moves
  kTagLinkInput,
  kTagSourceLast,    // schema 5's fields: the source is the bytes after their digest
  kTagFieldsDigest,  // schema 5's program digest: the digest of its other fields
  kTagProgram,       // schema 5's key with reads: the program's digest
};

std::string number_text(uint64_t v) {
  uint8_t b[8];
  store_le(b, v, 8);
  return std::string(reinterpret_cast<const char *>(b), 8);
}

std::string short_digest(ByteView v) {
  const std::array<uint8_t, 16> h = xxh3_128(v.data, v.size);
  return to_hex(ByteView(h.data(), h.size()));
}

// The key's fields in order, each to visit(tag, value, describe): the one walk derive_key hashes
// and key_fields renders. describe() returns the field's name and how it is shown; only rendering
// calls it, so that deriving a key builds no display text. with_fields: also the context's fields
// (the entry's key, not the identity's).
using Described = std::pair<std::string, std::string>;

// A field's name (a path, a variable) is part of what it says: hashed with its value. Made in
// scratch, whose capacity the walk's fields share (a string per field was a tenth of a key's
// allocations); every visitor consumes the view before the next field.
ByteView named_value(const KeyField &f, std::string &scratch) {
  scratch.assign(f.name);
  scratch.push_back('\0');
  scratch.append(f.value);
  return ByteView(scratch);
}

template <typename Visit>
void walk_fields(const std::vector<KeyField> &fields, Visit &&visit, std::string &scratch) {
  uint8_t count[8];
  store_le(count, fields.size(), 8);
  visit(kTagFieldCount, ByteView(count, 8), [] { return Described(); });
  for (const KeyField &f : fields)
    visit(f.tag, named_value(f, scratch), [&] { return Described(f.name, f.shown); });
}

// How the walk gives the source: by its digest in its place (schema 4), or as a mark whose
// bytes the caller appends after the walk (schema 5's program digest).
enum class SourceAs { digest, last };

template <typename Visit>
void walk(const ProgramDesc &p, const KeyContext *context, bool with_fields, SourceAs source_as,
          Visit &&visit) {
  static const char *const kCodeTypes[] = {"c++", "ptx", "nvvm", "link"};
  static const char *const kTargets[] = {"cubin", "ptx", "ltoir", "nvrtc"};
  static const char *const kInputKinds[] = {"cubin", "ptx", "ltoir", "fatbin", "object", "library"};
  check_program(p);
  // NVRTC's options are canonical (program_options); nvJitLink's and libNVVM's are keyed as given.
  const bool cxx = p.code_type == CodeType::cxx;
  std::vector<std::string> verbatim;
  if (!cxx) verbatim.assign(p.options.begin(), p.options.end());
  const std::vector<std::string> &options = cxx ? program_options(p).canonical : verbatim;
  auto number = [&](uint8_t tag, uint64_t v, auto &&describe) {
    uint8_t b[8];
    store_le(b, v, 8);
    visit(tag, ByteView(b, 8), describe);
  };
  if (!context || context->name_in_identity)
    visit(kTagName, p.name, [&] { return Described("name", p.name); });
  number(kTagCodeType, uint64_t(p.code_type),
         [&] { return Described("code_type", kCodeTypes[size_t(p.code_type)]); });
  number(kTagTarget, uint64_t(p.target),
         [&] { return Described("target", kTargets[size_t(p.target)]); });
  if (context && !context->nvrtc_build.empty())
    visit(kTagNvrtcBuild, context->nvrtc_build,
          [&] { return Described("nvrtc_build", context->nvrtc_build); });
  else
    number(kTagNvrtcVersion, p.nvrtc_version,
           [&] { return Described("nvrtc_version", std::to_string(p.nvrtc_version)); });
  auto show_source = [&] { return Described("source", short_digest(p.source)); };
  if (source_as == SourceAs::last) {
    visit(kTagSourceLast, ByteView(), show_source);
  } else {
    const ContentDigest &source = source_digest(p);
    visit(kTagSource, ByteView(source.data(), source.size()), show_source);
  }
  number(kTagOptionCount, options.size(),
         [&] { return Described("options", std::to_string(options.size())); });
  for (size_t i = 0; i < options.size(); ++i)
    visit(kTagOption, options[i],
          [&] { return Described("option[" + std::to_string(i) + "]", options[i]); });

  // Headers and name expressions are sets to NVRTC: their order must not change the key.
  // libNVVM's extra modules (in the header slots) are linked in the order given.
  auto headers = p.headers;
  if (cxx) std::stable_sort(headers.begin(), headers.end());
  number(kTagHeaderCount, headers.size(),
         [&] { return Described("headers", std::to_string(headers.size())); });
  for (const auto &header : headers) {  // not a structured binding: lambdas capture it (clang 14)
    const std::string_view name = header.first, text = header.second;
    visit(kTagHeaderName, name, [&] { return Described("header name", name); });
    visit(kTagHeaderSource, text,
          [&] { return Described("header " + std::string(name), short_digest(text)); });
  }
  // Sorted into a copy only when they are not in order already (an allocation per key).
  std::vector<std::string_view> sorted_exprs;
  const bool in_order = std::is_sorted(p.name_expressions.begin(), p.name_expressions.end());
  if (!in_order) {
    sorted_exprs = p.name_expressions;
    std::sort(sorted_exprs.begin(), sorted_exprs.end());
  }
  const std::vector<std::string_view> &exprs = in_order ? p.name_expressions : sorted_exprs;
  number(kTagNameExprCount, exprs.size(), [&] {
    std::string joined;
    for (std::string_view e : exprs)
      joined += std::string(joined.empty() ? "" : ", ") + std::string(e);
    return Described("name_expressions", joined);
  });
  for (std::string_view e : exprs) visit(kTagNameExpr, e, [] { return Described(); });
  if (p.extra_digest)
    visit(kTagExtraDigest, *p.extra_digest,
          [&] { return Described("extra_digest", short_digest(*p.extra_digest)); });
  else
    number(kTagNoExtraDigest, 0, [] { return Described("extra_digest", "none"); });
  if (p.code_type == CodeType::link) {
    number(kTagLinkInputCount, p.link_inputs.size(),
           [&] { return Described("inputs", std::to_string(p.link_inputs.size())); });
    for (size_t i = 0; i < p.link_inputs.size(); ++i) {
      const LinkInput &in = p.link_inputs[i];
      const ContentDigest d = content_digest(in.data);
      const std::string value = number_text(uint64_t(in.kind)) + std::string(in.name) +
                                std::string(1, '\0') + std::string(d.begin(), d.end());
      visit(kTagLinkInput, value, [&] {
        return Described("input[" + std::to_string(i) + "] " + kInputKinds[size_t(in.kind)] + " " +
                             std::string(in.name),
                         short_digest(in.data));
      });
    }
  }
  if (!context) return;
  std::string scratch;
  for (const KeyField &f : context->environment)
    visit(kTagEnvironment, named_value(f, scratch), [&] { return Described(f.name, f.shown); });
  if (with_fields) walk_fields(context->fields, visit, scratch);
}

Key hash_walk(const ProgramDesc &p, const KeyContext *context, bool with_fields,
              std::string_view schema) {
  Hasher h;
  h.field(kTagSchema, schema);
  walk(p, context, with_fields, SourceAs::digest,
       [&](uint8_t tag, ByteView value, auto &&) { h.field(tag, value); });
  return h.finish();
}

// A program's fields as encoded for schema 5, gathered in a buffer the thread reuses (memcpy, as
// std::string::append's checks per field were a tenth of a small key; shrunk back only past
// kKeptSize).
class FieldBuffer {
 public:
  void raw(const void *d, size_t n) {
    if (used_ + n > bytes_.size()) grow(used_ + n);
    if (n) std::memcpy(bytes_.data() + used_, d, n);
    used_ += n;
  }
  std::string_view view() const { return {bytes_.data(), used_}; }
  void clear() {
    used_ = 0;
    // Grown by large in-memory headers or link inputs: not kept at that size by the thread.
    if (bytes_.size() > kKeptSize) std::string(kKeptSize, '\0').swap(bytes_);
  }

 private:
  [[gnu::noinline]] void grow(size_t needed) {
    bytes_.resize(std::max(bytes_.size() * 2, needed + 1024));
  }
  static constexpr size_t kKeptSize = 64 * 1024;
  std::string bytes_;
  size_t used_ = 0;
};

// The bytes that begin the digests of programs whose fields this thread encoded last: the schema
// and the fields' digest. A process keys many sources with one name, target and set of options,
// and for a small source those fields (a few hundred bytes, three BLAKE2b blocks) cost a third of
// the key: kept, the program's digest is that of 85 bytes and the source, whose blocks are the
// source's, plus at most one.
class RecentProgramPrefixes {
 public:
  std::string_view prefix(std::string_view fields, DigestContextPool &pool) {
    for (Slot &slot : slots_)
      if (slot.filled && slot.fields == fields) return slot.prefix;
    Hasher h(pool);
    h.field(kTagSchema, algo().program_schema);
    h.raw(fields.data(), fields.size());
    const ContentDigest of_fields = h.finish();
    std::string prefix;
    AppendTo to{prefix};
    encode_field(to, kTagSchema, algo().program_schema);
    encode_field(to, kTagFieldsDigest, ByteView(of_fields.data(), of_fields.size()));
    // Kept up to a size (in-memory headers or link inputs can be large); beyond it, only until
    // the next call.
    if (fields.size() > kMaxKept) return unkept_ = std::move(prefix);
    Slot &slot = slots_[next_++ % kSlots];
    slot.filled = false;  // so that a failed copy leaves no slot whose prefix is not its fields'
    slot.fields.assign(fields);
    slot.prefix = std::move(prefix);
    slot.filled = true;
    return slot.prefix;
  }

 private:
  static constexpr size_t kSlots = 4, kMaxKept = 16 * 1024;
  struct Slot {
    std::string fields, prefix;
    bool filled = false;
  };
  Slot slots_[kSlots];
  std::string unkept_;
  size_t next_ = 0;
};

}  // namespace

void check_program(const ProgramDesc &p) {
  if (p.code_type < CodeType::cxx || p.code_type > CodeType::link)
    throw Error(Status::invalid_arg, "unknown code_type " + std::to_string(int(p.code_type)));
  if (p.target < Target::cubin || p.target > Target::nvrtc_outputs)
    throw Error(Status::invalid_arg, "unknown target " + std::to_string(int(p.target)));
  if (!p.source.data) throw Error(Status::invalid_arg, "program source is NULL");
  for (const LinkInput &in : p.link_inputs)
    if (in.kind < LinkInputKind::cubin || in.kind > LinkInputKind::library)
      throw Error(Status::invalid_arg, "unknown link input kind " + std::to_string(int(in.kind)));
  // A front end of a JIT library's API (the drop-ins) stores every output of a run under its own
  // target, whatever the code type.
  if (p.target == Target::nvrtc_outputs) return;
  const bool to_cubin = p.target == Target::cubin, to_ptx = p.target == Target::ptx;
  if (p.code_type == CodeType::ptx && !to_cubin)
    throw Error(Status::invalid_arg,
                "PTX compiles to a cubin (PCACHE_TARGET_CUBIN) with nvJitLink");
  if (p.code_type == CodeType::nvvm && !to_ptx && p.target != Target::ltoir)
    throw Error(Status::invalid_arg,
                "libNVVM compiles NVVM IR to PTX or LTO-IR (PCACHE_TARGET_PTX or _LTOIR)");
  if (p.code_type == CodeType::link && !to_cubin && !to_ptx)
    throw Error(Status::invalid_arg,
                "a link makes a cubin, or PTX from LTO-IR (PCACHE_TARGET_CUBIN "
                "or _PTX)");
}

const std::vector<std::string_view> &nvrtc_load_time_variables() {
  // Read by libnvrtc while it loads or on its first compile only, and kept for the process, so
  // a compile's observation may not see them: found with a getenv logger over a compile corpus
  // (tests/observe_strace_test.py checks the list against libnvrtc 12 and 13).
  static const std::vector<std::string_view> names = {"AS_SECURE_LOG_FILE",
                                                      "CAN_FINALIZE_DEBUG",
                                                      "CUDA_CACHE_DISABLE",
                                                      "DUMP_KNOBS_TO_FILE",
                                                      "EDG_BASE",
                                                      "EDG_MODULES_PATH",
                                                      "LIBNVVM_DISABLE_CONCURRENT_API",
                                                      "LLVM_OVERRIDE_PRODUCER",
                                                      "NVRTC",
                                                      "NVRTCWIZ",
                                                      "NVRTC_APPEND_FLAGS",
                                                      "NVRTC_DISABLE_CONCURRENT_NVVM",
                                                      "NVRTC_DISABLE_PCH",
                                                      "NVRTC_INTERNAL_GLOBAL_LOCK",
                                                      "NVRTC_PCH_HEAP_SIZE",
                                                      "NVVM_IR_VER_CHK",
                                                      "NV_NVVM_VERSION",
                                                      "TMPDIR",
                                                      "bar"};
  return names;
}

std::vector<KeyField> nvrtc_environment_fields() {
  // One pass over the environment, not a getenv per name (each scans all of it), and the fields'
  // names made once: this ran on every compile and was a seventh of a drop-in hit's instructions.
  // The first entry of a name wins and an entry without '=' names nothing, as with getenv.
  struct Names {
    std::vector<std::string> fields;                  // "nvrtc env NAME", in the list's order
    std::unordered_map<std::string_view, size_t> at;  // NAME -> its place in the list
  };
  static const Names known = [] {
    Names n;
    const std::vector<std::string_view> &list = nvrtc_load_time_variables();
    for (size_t i = 0; i < list.size(); ++i) {
      n.fields.push_back("nvrtc env " + std::string(list[i]));
      n.at.emplace(list[i], i);
    }
    return n;
  }();
  std::vector<const char *> values(known.fields.size(), nullptr);
  for (char **entry = environ; entry && *entry; ++entry) {
    const char *eq = std::strchr(*entry, '=');
    if (!eq) continue;
    const auto it = known.at.find(std::string_view(*entry, size_t(eq - *entry)));
    if (it != known.at.end() && !values[it->second]) values[it->second] = eq + 1;
  }
  std::vector<KeyField> fields(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    KeyField &f = fields[i];
    f.tag = kTagEnvironment;
    f.name = known.fields[i];
    if (values[i]) {
      f.value.reserve(1 + std::strlen(values[i]));
      f.value.push_back('=');
      f.value.append(values[i]);
      f.shown = values[i];
    } else {
      f.value = f.shown = "unset";
    }
  }
  return fields;
}

namespace {

// The option lists this thread parsed last: a process compiles or keys many programs with one
// set of options, and parsing them (a dozen allocations) was a tenth of a small program's key.
// Parsing is a function of the strings alone, so an equal list reuses the result.
class RecentOptions {
 public:
  // Lengths first: string_view's == compares the common prefix before the lengths.
  static bool same_text(std::string_view a, const std::string &b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
  }
  std::shared_ptr<const ParsedOptions> parsed(const std::vector<std::string_view> &options) {
    for (Slot &slot : slots_)
      if (slot.parsed &&
          std::equal(options.begin(), options.end(), slot.raw.begin(), slot.raw.end(), same_text))
        return slot.parsed;
    auto parsed = std::make_shared<const ParsedOptions>(parse_options(options));
    Slot &slot = slots_[next_++ % kSlots];
    slot.raw.assign(options.begin(), options.end());
    slot.parsed = parsed;
    return parsed;
  }

 private:
  static constexpr size_t kSlots = 4;
  struct Slot {
    std::vector<std::string> raw;
    std::shared_ptr<const ParsedOptions> parsed;
  };
  Slot slots_[kSlots];
  size_t next_ = 0;
};

// What keys keep per thread (util/thread_state.hpp: usable from any thread_local destructor),
// reached by one thread-local lookup.
struct KeyThread {
  DigestContextPool pool;
  FieldBuffer fields;
  RecentProgramPrefixes prefixes;
  RecentOptions options;
};

KeyThread &key_thread() {
  return ThreadState<KeyThread>::get();
}

DigestContextPool &thread_digest_pool() {
  return key_thread().pool;
}

}  // namespace

const ParsedOptions &program_options(const ProgramDesc &program) {
  if (!program.parsed_options)
    program.parsed_options = key_thread().options.parsed(program.options);
  return *program.parsed_options;
}

const ContentDigest &source_digest(const ProgramDesc &program) {
  if (!program.source_digest) program.source_digest = content_digest(program.source);
  return *program.source_digest;
}

Key identity_key(const ProgramDesc &p, const KeyContext &context) {
  return hash_walk(p, &context, false, algo().identity_schema);
}

Key derive_key(const ProgramDesc &p, const KeyContext *context) {
  return hash_walk(p, context, true, algo().schema);
}

std::string identity_encoding(const ProgramDesc &p, const KeyContext &context) {
  std::string out;
  out.reserve(p.source.size + 1024);
  AppendTo to{out};
  walk(p, &context, false, SourceAs::last,
       [&](uint8_t tag, ByteView value, auto &&) { encode_field(to, tag, value); });
  // A field of its own, with its length: raw bytes after the last field would let a program
  // whose list of variables is one shorter carry the missing one's field in its source.
  encode_field(to, kTagSource, p.source);
  return out;
}

std::string_view identity_schema() {
  return algo().identity_schema;
}

bool is_identity_schema(std::string_view s) {
  return s == kIdentityBlake2 || s == kIdentitySha256;
}

bool key_hash_at_hand() {
  // Mapped first: once it is (every compile of a warm process), one atomic load answers, where
  // getenv scans the whole environment.
  if (libcrypto_in_process()) return true;
  if (test_hooks::force_sha256() || test_hooks::fetch_digests()) return true;
  const char *conf = std::getenv("OPENSSL_CONF");
  return conf && *conf;
}

std::string_view program_prefix(const ProgramDesc &p) {
  KeyThread &thread = key_thread();
  FieldBuffer &fields = thread.fields;
  fields.clear();
  walk(p, nullptr, false, SourceAs::last,
       [&](uint8_t tag, ByteView value, auto &&) { encode_field(fields, tag, value); });
  return thread.prefixes.prefix(fields.view(), thread.pool);
}

ContentDigest program_digest_after(std::string_view prefix, ByteView source) {
  if (const std::optional<ContentDigest> kept = program_digest_memo().find(prefix, source))
    return *kept;
  return hashed_program_digest(prefix, source);
}

ContentDigest hashed_program_digest(std::string_view prefix, ByteView source) {
  Hasher h;
  h.raw(prefix.data(), prefix.size());
  h.raw(source.data, source.size);
  const ContentDigest digest = h.finish();
  program_digest_memo().note(prefix, source, digest);
  return digest;
}

ContentDigest program_digest(const ProgramDesc &p) {
  return program_digest_after(program_prefix(p), p.source);
}

Key standalone_key(const ContentDigest &program, const std::vector<KeyField> &reads) {
  if (reads.empty()) return program;
  Hasher h;
  h.field(kTagSchema, algo().reads_schema);
  h.field(kTagProgram, ByteView(program.data(), program.size()));
  std::string scratch;
  walk_fields(
      reads, [&](uint8_t tag, ByteView value, auto &&) { h.field(tag, value); }, scratch);
  return h.finish();
}

std::vector<std::pair<std::string, std::string>> key_fields(const ProgramDesc &p,
                                                            const KeyContext *context) {
  std::vector<std::pair<std::string, std::string>> f;
  walk(p, context, true, SourceAs::digest, [&](uint8_t, ByteView, auto &&describe) {
    Described d = describe();
    if (!d.first.empty()) f.push_back(std::move(d));
  });
  return f;
}

ContentDigest content_digest(ByteView bytes) {
  Hasher h;
  h.raw(bytes.data, bytes.size);
  const Key k = h.finish();
  ContentDigest d;
  std::memcpy(d.data(), k.data(), d.size());
  return d;
}

const char *key_hash_name() {
  return algo().name;
}

bool key_hash_from_default_provider() {
  return algo().from_default_provider;
}

}  // namespace progcache
