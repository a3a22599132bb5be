#include "core/include_scan.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>

#include "core/digest_memo.hpp"
#include "core/file_facts.hpp"
#include "util/byte_io.hpp"
#include "util/fork_guard.hpp"
#include "util/paths.hpp"
#include "util/thread_state.hpp"

namespace progcache {
namespace {

constexpr size_t kMaxDependencies = 20000;

class Scanner {
 public:
  // SOURCE_FACTS: the source's, where the caller scanned it already (else null).
  Scanner(const ProgramDesc &p, MemoStore *memos, FactsPtr source_facts)
      : program_(p),
        options_(program_options(p)),
        memos_(memos),
        source_facts_(std::move(source_facts)) {}

  IncludeScan run() {
    const std::string name(program_.name);
    for (const std::string &pre : options_.pre_includes) {
      std::vector<std::string> candidates{pre};
      if (pre.empty() || pre[0] != '/')
        for (const std::string &dir : options_.include_dirs)
          candidates.push_back(join_path(dir, pre));
      probe_in_order(candidates, DirectiveKind::include);
    }
    for (std::string_view o : program_.options) lexical_ |= lexical_facts(o);
    if (!source_facts_)
      source_facts_ =
          std::make_shared<const FileFacts>(scanned_facts_of_text(program_.source.str()));
    queue(source_facts_,
          options_.no_source_include ? std::optional<std::string>() : dir_part(name));
    while (!pending_.empty() && result_.uncacheable.empty()) {
      auto [facts, dir] = pending_.front();
      pending_.pop_front();
      visit(*facts, dir);
    }
    for (const std::string &call : macro_calls_)
      if (wrappers_.count(call) && !program_.extra_digest)
        fail("a __has_include wrapper (" + call + ") called with an operand built by macros");
    if (lexical_.uses_time()) fail("the source, an option or a header uses __DATE__ or __TIME__");
    return std::move(result_);
  }

 private:
  void visit(const FileFacts &facts, const std::optional<std::string> &quote_dir) {
    if (!facts.directives.computed.empty() && !program_.extra_digest)
      fail("a computed include the scan cannot follow: " + facts.directives.computed);
    for (const std::string &w : facts.directives.wrappers) wrappers_.insert(w);
    for (const std::string &c : facts.directives.macro_calls) macro_calls_.insert(c);
    for (const Directive &d : facts.directives.names) {
      if (!result_.uncacheable.empty()) return;
      resolve(d, quote_dir);
    }
  }

  void resolve(const Directive &d, const std::optional<std::string> &quote_dir) {
    if (d.kind == DirectiveKind::include || d.kind == DirectiveKind::include_next) {
      for (const auto &[hname, htext] : program_.headers)
        if (hname == d.name && scanned_.insert("\x01memory:" + d.name).second)
          queue(std::make_shared<const FileFacts>(scanned_facts_of_text(htext)), dir_part(d.name));
    }
    std::vector<std::string> candidates;
    // NVRTC looks for a standard header name without an extension ("version") also as
    // "version.stdh", right after the plain name (seen under strace).
    const size_t slash = d.name.rfind('/');
    const bool stdh = d.name.find('.', slash == std::string::npos ? 0 : slash) == std::string::npos;
    auto add = [&](std::string path) {
      candidates.push_back(path);
      if (stdh) candidates.push_back(std::move(path) + ".stdh");
    };
    if (!d.name.empty() && d.name[0] == '/') {
      add(d.name);
    } else {
      if (!d.angle && d.kind != DirectiveKind::include_next && quote_dir) add(*quote_dir + d.name);
      for (const std::string &dir : options_.include_dirs) add(join_path(dir, d.name));
    }
    probe_in_order(candidates, d.kind);
  }

  // Probes candidates as NVRTC does, up to the first that exists; #include_next, whose starting
  // point the scan does not track, takes every one.
  void probe_in_order(const std::vector<std::string> &candidates, DirectiveKind kind) {
    for (const std::string &path : candidates) {
      FactsPtr facts = probe(path);
      if (!facts) continue;
      if (kind != DirectiveKind::has_include && kind != DirectiveKind::embed &&
          scanned_.insert(path).second)
        queue(facts, dir_part(path));
      if (kind != DirectiveKind::include_next) return;
    }
  }

  void queue(FactsPtr facts, std::optional<std::string> dir) {
    lexical_ |= facts->lexical;
    pending_.emplace_back(std::move(facts), std::move(dir));
  }

  // Records path as a dependency; its facts if it exists as a file.
  FactsPtr probe(const std::string &path) {
    if (auto it = seen_.find(path); it != seen_.end()) return it->second;
    if (result_.dependencies.size() >= kMaxDependencies) {
      fail("more than " + std::to_string(kMaxDependencies) + " header paths to check");
      return nullptr;
    }
    HeaderDependency dep;
    dep.path = path;
    FactsPtr facts;
    struct stat st;
    const int rc = ::stat(path.c_str(), &st);
    if (rc == 0 && S_ISREG(st.st_mode)) {
      std::string error;
      facts = facts_of_file(path, StatIdentity::of(st), memos_, &dep.stat, &error);
      if (!facts) fail(error);
      // There, read or not (over 64 MiB, unreadable): reported absent, it was also never
      // still_as_scanned, so every later scan started again.
      dep.present = true;
      dep.recheck_content = dep.stat.is_racy() || !(dep.stat == StatIdentity::of(st));
    } else if (rc != 0 && errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG) {
      fail("cannot check header '" + path + "': " + std::strerror(errno));
    }  // a directory or a device where a header is looked for: NVRTC finds no header there
    if (facts) dep.digest = facts->digest;
    result_.dependencies.push_back(std::move(dep));
    seen_.emplace(path, facts);
    return facts;
  }

  void fail(std::string why) {
    if (result_.uncacheable.empty()) result_.uncacheable = std::move(why);
  }

  const ProgramDesc &program_;
  const ParsedOptions &options_;
  MemoStore *memos_;
  FactsPtr source_facts_;
  IncludeScan result_;
  SourceFacts lexical_;
  std::set<std::string> wrappers_, macro_calls_;
  std::map<std::string, FactsPtr> seen_;
  std::set<std::string> scanned_;
  std::deque<std::pair<FactsPtr, std::optional<std::string>>> pending_;
};

// Manifests (ccache's direct mode): the scan of a program is a function of the program and of
// the state of every path it probed. When each probed path still looks the same (present ones:
// the same stat identity, not recently changed; absent ones: still absent), the earlier scan is
// the answer, without parsing a header or resolving a name again. The working directory is not
// in the name: a relative path is probed again from wherever the process is, and a file met
// from another directory is another file (another identity), so the check above already tells;
// a getcwd per key was an eighth of a small program's key.
std::string manifest_text(const ProgramDesc &p) {
  ByteWriter w;
  w.str(p.name);
  const ContentDigest &source = source_digest(p);  // the key's too: the source is hashed once
  w.str(std::string_view(reinterpret_cast<const char *>(source.data()), source.size()));
  for (std::string_view o : p.options) w.str(o);
  w.u8(0);
  for (const auto &[n, t] : p.headers) {
    w.str(n);
    const ContentDigest d = content_digest(t);
    w.str(std::string_view(reinterpret_cast<const char *>(d.data()), d.size()));
  }
  w.u8(p.extra_digest ? 1 : 0);
  return w.take();
}

std::string digest_hex(std::string_view text) {
  const ContentDigest d = content_digest(text);
  return to_hex(ByteView(d.data(), d.size()));
}

// The process's own manifests are found by the text itself, which costs no digest (a digest of
// it was a fifth of a small program's key), or by its digest where the text is long, so that
// 10,000 manifests stay small. The two kinds of name cannot meet: their first bytes differ.
std::string in_process_name(const std::string &text) {
  return text.size() <= 1024 ? "t" + text : "d" + digest_hex(text);
}

std::string memo_name(const std::string &text) {
  return "scan/" + digest_hex(text);
}

bool still_as_scanned(const std::vector<HeaderDependency> &deps) {
  for (const HeaderDependency &dep : deps) {
    struct stat st;
    const bool present = ::stat(dep.path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (present != dep.present) return false;
    if (present && (dep.recheck_content || !(StatIdentity::of(st) == dep.stat) ||
                    StatIdentity::of(st).is_racy()))
      return false;
  }
  return true;
}

std::string encode_manifest(const IncludeScan &scan) {
  ByteWriter w;
  w.bytes("PCM2");
  w.str(scan.uncacheable);
  w.u32(uint32_t(scan.dependencies.size()));
  for (const HeaderDependency &d : scan.dependencies) {
    w.str(d.path);
    w.u8(d.present);
    w.bytes(std::string_view(reinterpret_cast<const char *>(d.digest.data()), d.digest.size()));
    for (uint64_t v : {d.stat.dev, d.stat.ino, d.stat.size, uint64_t(d.stat.mtime_ns),
                       uint64_t(d.stat.ctime_ns)})
      w.u64(v);
  }
  return w.take();
}

std::optional<IncludeScan> decode_manifest(std::string_view in) {
  ByteReader r(in);
  IncludeScan scan;
  if (r.bytes(4) != "PCM2") return std::nullopt;
  scan.uncacheable = std::string(r.str());
  const uint32_t count = r.count(4 + 1 + 32 + 40);
  if (count > kMaxDependencies) return std::nullopt;
  for (uint32_t i = 0; i < count && !r.failed(); ++i) {
    HeaderDependency d;
    d.path = std::string(r.str());
    d.present = r.u8() != 0;
    const std::string_view digest = r.bytes(d.digest.size());
    if (r.failed()) break;
    std::memcpy(d.digest.data(), digest.data(), d.digest.size());
    d.stat.dev = r.u64();
    d.stat.ino = r.u64();
    d.stat.size = r.u64();
    d.stat.mtime_ns = int64_t(r.u64());
    d.stat.ctime_ns = int64_t(r.u64());
    scan.dependencies.push_back(std::move(d));
  }
  if (!r.done()) return std::nullopt;
  return scan;
}

struct DigestHash {
  size_t operator()(const ContentDigest &d) const {
    size_t h;
    std::memcpy(&h, d.data(), sizeof h);  // a digest's bytes are already uniform
    return h;
  }
};

// The scan this thread found by program digest last: a program keyed again is answered without
// the process's lock and map (their atomic operations were a tenth of a small key's time).
struct LastScan {
  ContentDigest id{};
  std::shared_ptr<const IncludeScan> scan;
};

ForkSafeMutex g_manifests_mutex{ForkSafeMutex::kInner};
// The process's scans, by manifest text (or its digest) and by program digest.
std::unordered_map<std::string, std::shared_ptr<const IncludeScan>> g_manifests;
std::unordered_map<ContentDigest, std::shared_ptr<const IncludeScan>, DigestHash> g_program_scans;

// The kept scan filed under TEXT's name or PROGRAM_ID; null if none.
std::shared_ptr<const IncludeScan> kept_scan(const std::string &text,
                                             const ContentDigest *program_id) {
  std::lock_guard lock(g_manifests_mutex);
  if (program_id) {
    auto it = g_program_scans.find(*program_id);
    return it == g_program_scans.end() ? nullptr : it->second;
  }
  auto it = g_manifests.find(in_process_name(text));
  return it == g_manifests.end() ? nullptr : it->second;
}

void keep_scan(const std::string &text, const ContentDigest *program_id,
               std::shared_ptr<const IncludeScan> scan) {
  std::lock_guard lock(g_manifests_mutex);
  if (g_manifests.size() + g_program_scans.size() > 10000) {  // bound a long-lived process
    g_manifests.clear();
    g_program_scans.clear();
  }
  if (program_id) {
    g_program_scans[*program_id] = std::move(scan);
  } else {
    g_manifests[in_process_name(text)] = std::move(scan);
  }
}

}  // namespace

// scan_includes, with the source's facts where they were scanned already (else null).
static IncludeScan scan_includes_with(const ProgramDesc &program, MemoStore *memos,
                                      const ContentDigest *program_id, FactsPtr source_facts) {
  // The stored memos' names need the text (a digest of the source); the process's own scans are
  // found by the program's digest where the caller has one.
  const std::string text = memos || !program_id ? manifest_text(program) : std::string();
  LastScan &last = ThreadState<LastScan>::get();
  const bool same_as_last = program_id && last.scan && last.id == *program_id;
  std::shared_ptr<const IncludeScan> found;
  if (!same_as_last) found = kept_scan(text, program_id);
  if (program_id && found) last = {*program_id, found};
  if (!found && !same_as_last && memos)
    if (auto stored = memos->load_memo(memo_name(text)))
      if (auto m = decode_manifest(*stored)) found = std::make_shared<const IncludeScan>(*m);
  const IncludeScan *earlier = same_as_last ? last.scan.get() : found.get();
  if (earlier && still_as_scanned(earlier->dependencies)) return *earlier;
  IncludeScan scan = Scanner(program, memos, std::move(source_facts)).run();
  bool racy = false;
  for (const HeaderDependency &d : scan.dependencies) racy |= d.recheck_content;
  if (!racy) {
    auto kept = std::make_shared<const IncludeScan>(scan);
    if (memos) memos->save_memo(memo_name(text), encode_manifest(*kept));
    if (program_id) last = {*program_id, kept};
    keep_scan(text, program_id, std::move(kept));
  }
  return scan;
}

IncludeScan scan_includes(const ProgramDesc &program, MemoStore *memos,
                          const ContentDigest *program_id) {
  return scan_includes_with(program, memos, program_id, nullptr);
}

DigestedScan digest_and_scan_includes(std::string_view prefix, const ProgramDesc &program) {
  DigestedScan r;
  FactsPtr source_facts;
  if (const std::optional<ContentDigest> kept =
          program_digest_memo().find(prefix, program.source)) {
    r.digest = *kept;
  } else if (scan_beside_pays(program.source.size)) {
    // Wasted only where the process kept a scan of this digest but not its source (a source's
    // second key, when the memo copies it, or one above its kMaxSource): the other CPU's time,
    // none of this thread's.
    source_facts = std::make_shared<const FileFacts>(scanned_beside(
        program.source.str(), [&] { r.digest = hashed_program_digest(prefix, program.source); }));
  } else {
    r.digest = hashed_program_digest(prefix, program.source);
  }
  r.scan = scan_includes_with(program, nullptr, &r.digest, std::move(source_facts));
  return r;
}

std::vector<KeyField> scan_fields(const IncludeScan &scan) {
  std::vector<KeyField> fields;
  for (const HeaderDependency &d : scan.dependencies) {
    KeyField f;
    f.tag = kFieldRead;
    f.name = "file " + d.path;
    f.value = d.present ? std::string(d.digest.begin(), d.digest.end()) : std::string();
    f.shown = d.present ? to_hex(ByteView(d.digest.data(), d.digest.size())) : "absent";
    fields.push_back(std::move(f));
  }
  return fields;
}

}  // namespace progcache
