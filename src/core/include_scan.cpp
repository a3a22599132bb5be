#include "core/include_scan.hpp"

#include <fcntl.h>
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

#include "util/endian.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"

namespace progcache {
namespace {

constexpr size_t kMaxDependencies = 20000;
constexpr uint64_t kMaxHeaderBytes = uint64_t(64) << 20;

enum class DirectiveKind : uint8_t { include = 0, include_next = 1, has_include = 2, embed = 3 };

struct Directive {
  DirectiveKind kind = DirectiveKind::include;
  bool angle = false;
  std::string name;
};

// What the scan needs of one file: its digest and the names it may read.
struct FileFacts {
  ContentDigest digest{};
  std::vector<Directive> directives;
  bool time_macros = false;
  std::string computed;  // the first #include whose operand is a macro, "" if none
};

bool ident_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Removes backslash-newline splices, replaces comments by a space, and marks the bytes inside
// string and character literals (where identifiers are not macros) in *literal.
std::string clean_source(std::string_view text, std::vector<bool> *literal) {
  std::string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (text[i] == '\\' && i + 2 < text.size() && text[i + 1] == '\r' && text[i + 2] == '\n') {
      i += 2;
      continue;
    }
    s += text[i];
  }
  std::string out;
  out.reserve(s.size());
  literal->clear();
  literal->reserve(s.size());
  auto emit = [&](char c, bool lit) {
    out += c;
    literal->push_back(lit);
  };
  bool in_number = false;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    const char prev = out.empty() ? '\n' : out.back();
    if (in_number) {
      const bool exponent_sign =
          (c == '+' || c == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
      if (ident_char(c) || c == '.' || c == '\'' || exponent_sign) {
        emit(c, false);
        ++i;
        continue;
      }
      in_number = false;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      emit(' ', false);
      continue;
    }
    if (c >= '0' && c <= '9' && !ident_char(prev)) {
      in_number = true;
      emit(c, false);
      ++i;
      continue;
    }
    // Raw string literal: R"delim( ... )delim", possibly prefixed (u8R, LR, uR, UR).
    if (c == 'R' && i + 1 < s.size() && s[i + 1] == '"') {
      size_t p = out.size();
      while (p > 0 && ident_char(out[p - 1])) --p;
      const std::string prefix = out.substr(p);
      if (prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L") {
        const size_t open = s.find('(', i + 2);
        if (open != std::string::npos && open - (i + 2) <= 16) {
          const std::string close = ")" + s.substr(i + 2, open - (i + 2)) + "\"";
          const size_t end = s.find(close, open + 1);
          const size_t stop = end == std::string::npos ? s.size() : end + close.size();
          emit('R', false);
          for (size_t k = i + 1; k < stop; ++k) emit(s[k] == '\n' ? ' ' : s[k], true);
          i = stop;
          continue;
        }
      }
    }
    if (c == '"' || c == '\'') {
      emit(c, false);
      size_t k = i + 1;
      for (; k < s.size() && s[k] != c && s[k] != '\n'; ++k) {
        if (s[k] == '\\' && k + 1 < s.size() && s[k + 1] != '\n') emit(s[k++], true);
        emit(s[k], true);
      }
      if (k < s.size() && s[k] == c) emit(s[k++], false);
      i = k;
      continue;
    }
    emit(c, false);
    ++i;
  }
  return out;
}

void skip_space(std::string_view line, size_t *p) {
  while (*p < line.size() && (line[*p] == ' ' || line[*p] == '\t' || line[*p] == '\f' ||
                              line[*p] == '\v' || line[*p] == '\r'))
    ++*p;
}

// "name" or <name> at *p; false if the operand is anything else.
bool header_name(std::string_view line, size_t *p, bool *angle, std::string *name) {
  if (*p >= line.size() || (line[*p] != '"' && line[*p] != '<')) return false;
  const char close = line[*p] == '"' ? '"' : '>';
  const size_t end = line.find(close, *p + 1);
  if (end == std::string_view::npos) return false;
  *angle = close == '>';
  *name = std::string(line.substr(*p + 1, end - *p - 1));
  *p = end + 1;
  return true;
}

bool path_like(std::string_view s) {
  if (s.empty()) return false;
  bool letter = false;
  for (char c : s) {
    if (!(ident_char(c) || c == '.' || c == '/' || c == '-' || c == '+')) return false;
    letter |= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return letter;
}

void parse_directive(std::string_view line, const std::vector<bool> &literal, size_t line_start,
                     FileFacts *facts) {
  size_t p = 0;
  skip_space(line, &p);
  if (p >= line.size() || line[p] != '#') return;
  ++p;
  skip_space(line, &p);
  size_t q = p;
  while (q < line.size() && ident_char(line[q])) ++q;
  const std::string_view word = line.substr(p, q - p);
  p = q;
  skip_space(line, &p);
  const bool include_like =
      word == "include" || word == "include_next" || word == "import" || word == "embed";
  if (include_like) {
    Directive d;
    d.kind = word == "include_next" ? DirectiveKind::include_next
             : word == "embed"      ? DirectiveKind::embed
                                    : DirectiveKind::include;
    if (header_name(line, &p, &d.angle, &d.name)) {
      facts->directives.push_back(std::move(d));
    } else if (facts->computed.empty()) {
      facts->computed = "#" + std::string(word) + " " + std::string(line.substr(p));
    }
    return;
  }
  const bool condition = word == "if" || word == "elif";
  if (!condition && word != "define") return;
  // __has_include / __has_include_next with a literal operand; a macro operand inside #define
  // is resolved where the macro is used, which the #if extraction below covers.
  for (size_t at = 0; (at = line.find("__has_include", at)) != std::string_view::npos;) {
    const size_t begin = at;
    at += std::strlen("__has_include");
    if (line.substr(at, 5) == "_next") at += 5;
    if (literal[line_start + begin] || (begin > 0 && ident_char(line[begin - 1])) ||
        (at < line.size() && ident_char(line[at])))
      continue;
    size_t r = at;
    skip_space(line, &r);
    if (r >= line.size() || line[r] != '(') continue;
    ++r;
    skip_space(line, &r);
    Directive d;
    d.kind = DirectiveKind::has_include;
    if (header_name(line, &r, &d.angle, &d.name))
      facts->directives.push_back(std::move(d));
    else if (condition && facts->computed.empty())
      facts->computed = std::string(line);
  }
  if (!condition) return;
  // Header names handed to a macro that wraps __has_include (CCCL's _CCCL_HAS_INCLUDE(<x>)).
  for (size_t at = p; at < line.size(); ++at) {
    if (line[at] != '<' && line[at] != '"') continue;
    size_t r = at;
    Directive d;
    d.kind = DirectiveKind::has_include;
    if (header_name(line, &r, &d.angle, &d.name) && path_like(d.name)) {
      facts->directives.push_back(std::move(d));
      at = r - 1;
    }
  }
}

FileFacts extract_facts(std::string_view text) {
  FileFacts facts;
  std::vector<bool> literal;
  const std::string clean = clean_source(text, &literal);
  for (size_t i = 0; i < clean.size();) {
    if (!literal[i] && ident_char(clean[i]) && (i == 0 || !ident_char(clean[i - 1]))) {
      size_t j = i;
      while (j < clean.size() && ident_char(clean[j])) ++j;
      const std::string_view id(clean.data() + i, j - i);
      facts.time_macros |= id == "__DATE__" || id == "__TIME__" || id == "__TIMESTAMP__";
      i = j;
      continue;
    }
    ++i;
  }
  for (size_t start = 0; start < clean.size();) {
    size_t end = clean.find('\n', start);
    if (end == std::string::npos) end = clean.size();
    parse_directive(std::string_view(clean).substr(start, end - start), literal, start, &facts);
    start = end + 1;
  }
  return facts;
}

// Memo encoding: "PCF1", digest, time_macros, computed, directives (u32 little-endian lengths).
void put_u32(std::string &out, uint32_t v) {
  append_le(out, v, 4);
}

std::string encode_facts(const FileFacts &f) {
  std::string out = "PCF1";
  out.append(reinterpret_cast<const char *>(f.digest.data()), f.digest.size());
  out += char(f.time_macros);
  put_u32(out, uint32_t(f.computed.size()));
  out += f.computed;
  put_u32(out, uint32_t(f.directives.size()));
  for (const Directive &d : f.directives) {
    out += char(d.kind);
    out += char(d.angle);
    put_u32(out, uint32_t(d.name.size()));
    out += d.name;
  }
  return out;
}

// Reads the little-endian, length-checked encodings of the memos below; every read of a damaged
// or truncated memo gives nullopt, never an out-of-range access.
class MemoReader {
 public:
  explicit MemoReader(std::string_view in) : in_(in) {}
  std::optional<std::string_view> take(size_t n) {
    if (n > in_.size() - at_) return std::nullopt;
    at_ += n;
    return in_.substr(at_ - n, n);
  }
  std::optional<uint32_t> u32() {
    auto b = take(4);
    if (!b) return std::nullopt;
    return uint32_t(load_le(reinterpret_cast<const uint8_t *>(b->data()), 4));
  }
  std::optional<uint64_t> u64() {
    auto lo = u32(), hi = lo ? u32() : std::nullopt;
    if (!hi) return std::nullopt;
    return uint64_t(*lo) | uint64_t(*hi) << 32;
  }
  bool at_end() const { return at_ == in_.size(); }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

std::optional<FileFacts> decode_facts(std::string_view in) {
  MemoReader r(in);
  auto take = [&](size_t n) { return r.take(n); };
  auto u32 = [&] { return r.u32(); };
  FileFacts f;
  auto magic = take(4);
  auto digest = take(32);
  auto time = take(1);
  if (!magic || *magic != "PCF1" || !digest || !time || uint8_t((*time)[0]) > 1)
    return std::nullopt;
  std::memcpy(f.digest.data(), digest->data(), 32);
  f.time_macros = (*time)[0] == 1;
  auto computed_size = u32();
  auto computed = computed_size ? take(*computed_size) : std::nullopt;
  auto count = computed ? u32() : std::nullopt;
  if (!count) return std::nullopt;
  f.computed = std::string(*computed);
  for (uint32_t i = 0; i < *count; ++i) {
    auto kind = take(1), angle = take(1);
    auto size = angle ? u32() : std::nullopt;
    auto name = size ? take(*size) : std::nullopt;
    if (!name || uint8_t((*kind)[0]) > 3 || uint8_t((*angle)[0]) > 1) return std::nullopt;
    f.directives.push_back({DirectiveKind((*kind)[0]), (*angle)[0] == 1, std::string(*name)});
  }
  if (!r.at_end()) return std::nullopt;
  return f;
}

std::string read_all(int fd, uint64_t size, bool *ok) {
  std::string data(size, '\0');
  *ok = pread_all(fd, data.data(), size, 0);
  char extra;
  if (*ok && ::pread(fd, &extra, 1, off_t(size)) != 0) *ok = false;  // grew while read
  return data;
}

using FactsPtr = std::shared_ptr<const FileFacts>;

// Process-wide memo: "dev:ino:size:mtime:ctime" -> facts.
ForkSafeMutex g_facts_mutex{ForkSafeMutex::kInner};
std::unordered_map<std::string, FactsPtr> g_facts;

class Scanner {
 public:
  Scanner(const ProgramDesc &p, MemoStore *memos) : program_(p), memos_(memos) { parse_options(); }

  IncludeScan run() {
    const std::string name(program_.name);
    const size_t slash = name.rfind('/');
    const std::string main_dir = slash == std::string::npos ? "" : name.substr(0, slash + 1);
    for (const std::string &pre : pre_includes_) {
      std::vector<std::string> candidates{pre};
      if (pre.empty() || pre[0] != '/')
        for (const std::string &dir : include_dirs_) candidates.push_back(join(dir, pre));
      probe_in_order(candidates, DirectiveKind::include);
    }
    const FileFacts main = extract_facts(program_.source.str());
    result_.time_macros |= main.time_macros;
    visit(main, no_source_include_ ? std::optional<std::string>() : main_dir);
    while (!pending_.empty() && result_.uncacheable.empty()) {
      auto [facts, dir] = pending_.front();
      pending_.pop_front();
      visit(*facts, dir);
    }
    if (result_.time_macros && result_.uncacheable.empty())
      result_.uncacheable = "the source or a header uses __DATE__, __TIME__ or __TIMESTAMP__";
    return std::move(result_);
  }

 private:
  static std::string join(const std::string &dir, const std::string &name) {
    if (dir.empty()) return name;
    return dir.back() == '/' ? dir + name : dir + "/" + name;
  }
  static std::string dir_of(const std::string &path) {
    const size_t slash = path.rfind('/');
    return slash == std::string::npos ? "" : path.substr(0, slash + 1);
  }

  // NVRTC takes "-Idir", "-I dir", "-I=dir", "--include-path=dir", "--include-path dir"; for
  // "-I=dir" both "dir" and "=dir" are searched, so whichever NVRTC means is covered.
  void parse_options() {
    const auto &o = program_.options;
    for (size_t i = 0; i < o.size(); ++i) {
      const std::string_view opt = o[i];
      auto value_of = [&](std::string_view longname, std::string_view shortname,
                          bool attaches) -> std::optional<std::vector<std::string>> {
        for (std::string_view spelling : {longname, shortname}) {
          if (opt == spelling) {
            if (i + 1 < o.size()) return std::vector<std::string>{std::string(o[++i])};
            return std::vector<std::string>{};
          }
          if (opt.substr(0, spelling.size()) != spelling || opt.size() == spelling.size()) continue;
          const std::string_view rest = opt.substr(spelling.size());
          if (rest[0] == '=') {
            std::vector<std::string> v{std::string(rest.substr(1))};
            if (spelling == shortname) v.emplace_back(rest);
            return v;
          }
          if (attaches && spelling == shortname) return std::vector<std::string>{std::string(rest)};
        }
        return std::nullopt;
      };
      if (opt == "-no-source-include" || opt == "--no-source-include") {
        no_source_include_ = true;
      } else if (auto dirs = value_of("--include-path", "-I", true)) {
        include_dirs_.insert(include_dirs_.end(), dirs->begin(), dirs->end());
      } else if (auto files = value_of("--pre-include", "-include", false)) {
        pre_includes_.insert(pre_includes_.end(), files->begin(), files->end());
      }
    }
  }

  void visit(const FileFacts &facts, const std::optional<std::string> &quote_dir) {
    if (!facts.computed.empty() && !program_.extra_digest && result_.uncacheable.empty())
      result_.uncacheable = "a computed include the scan cannot follow: " + facts.computed;
    for (const Directive &d : facts.directives) {
      if (!result_.uncacheable.empty()) return;
      resolve(d, quote_dir);
    }
  }

  void resolve(const Directive &d, const std::optional<std::string> &quote_dir) {
    if (d.kind == DirectiveKind::include || d.kind == DirectiveKind::include_next) {
      for (const auto &[hname, htext] : program_.headers)
        if (hname == d.name && scanned_.insert("\x01memory:" + d.name).second)
          queue(std::make_shared<const FileFacts>(extract_facts(htext)), dir_of(d.name));
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
      for (const std::string &dir : include_dirs_) add(join(dir, d.name));
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
        queue(facts, dir_of(path));
      if (kind != DirectiveKind::include_next) return;
    }
  }

  void queue(FactsPtr facts, std::string dir) {
    result_.time_macros |= facts->time_macros;
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
      facts = facts_of(path, st, &dep);
      dep.present = facts != nullptr;
    } else if (rc != 0 && errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG) {
      fail("cannot check header '" + path + "': " + std::strerror(errno));
    }  // a directory or a device where a header is looked for: NVRTC finds no header there
    if (dep.present) dep.digest = facts->digest;
    result_.dependencies.push_back(std::move(dep));
    seen_.emplace(path, facts);
    return facts;
  }

  // The facts of an existing file, from the memos when its stat vouches for them.
  FactsPtr facts_of(const std::string &path, const struct stat &st, HeaderDependency *dep) {
    dep->stat = StatIdentity::of(st);
    dep->recheck_content = dep->stat.is_racy();
    const std::string memo_key = dep->stat.text();
    if (!dep->recheck_content) {
      {
        std::lock_guard lock(g_facts_mutex);
        if (auto it = g_facts.find(memo_key); it != g_facts.end()) return it->second;
      }
      if (memos_)
        if (auto text = memos_->load_memo("header/" + memo_key))
          if (auto f = decode_facts(*text)) return remember(memo_key, std::move(*f), false);
    }
    // Read what the descriptor holds; if the file changed since the stat, key what was read.
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat now;
    if (!fd || ::fstat(fd.get(), &now) != 0) {
      fail("cannot read header '" + path + "': " + std::strerror(errno));
      return nullptr;
    }
    if (!(StatIdentity::of(now) == dep->stat)) {
      dep->stat = StatIdentity::of(now);
      dep->recheck_content = true;
    }
    if (dep->stat.size > kMaxHeaderBytes) {
      fail("header '" + path + "' is larger than 64 MiB");
      return nullptr;
    }
    bool ok = false;
    const std::string data = read_all(fd.get(), dep->stat.size, &ok);
    if (!ok) {
      fail("header '" + path + "' could not be read whole (changing?)");
      return nullptr;
    }
    FileFacts f = extract_facts(data);
    f.digest = content_digest(data);
    if (dep->recheck_content) return std::make_shared<const FileFacts>(std::move(f));
    return remember(dep->stat.text(), std::move(f), true);
  }

  FactsPtr remember(const std::string &memo_key, FileFacts &&f, bool persist) {
    auto ptr = std::make_shared<const FileFacts>(std::move(f));
    if (persist && memos_) memos_->save_memo("header/" + memo_key, encode_facts(*ptr));
    std::lock_guard lock(g_facts_mutex);
    if (g_facts.size() > 100000) g_facts.clear();  // bound a long-lived process's memory
    g_facts[memo_key] = ptr;
    return ptr;
  }

  void fail(std::string why) {
    if (result_.uncacheable.empty()) result_.uncacheable = std::move(why);
  }

  const ProgramDesc &program_;
  MemoStore *memos_;
  std::vector<std::string> include_dirs_, pre_includes_;
  bool no_source_include_ = false;
  IncludeScan result_;
  std::map<std::string, FactsPtr> seen_;
  std::set<std::string> scanned_;
  std::deque<std::pair<FactsPtr, std::string>> pending_;
};

}  // namespace

namespace {

// Manifests (ccache's direct mode): the scan of a program is a function of the program and of
// the state of every path it probed. When each probed path still looks the same (present ones:
// the same stat identity, not recently changed; absent ones: still absent), the earlier scan is
// the answer, without parsing a header or resolving a name again.
std::string manifest_name(const ProgramDesc &p) {
  char cwd[4096];
  std::string in = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  auto add = [&](std::string_view v) {
    put_u32(in, uint32_t(v.size()));
    in.append(v.data(), v.size());
  };
  add(p.name);
  const ContentDigest &source = source_digest(p);  // the key's too: the source is hashed once
  add(std::string_view(reinterpret_cast<const char *>(source.data()), source.size()));
  for (std::string_view o : p.options) add(o);
  in += '\0';
  for (const auto &[n, t] : p.headers) {
    add(n);
    add(t);
  }
  in += p.extra_digest ? '\1' : '\0';
  const ContentDigest d = content_digest(in);
  return "manifest/" + to_hex(ByteView(d.data(), d.size()));
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
  std::string out = "PCM1";
  put_u32(out, uint32_t(scan.uncacheable.size()));
  out += scan.uncacheable;
  out += char(scan.time_macros);
  put_u32(out, uint32_t(scan.dependencies.size()));
  for (const HeaderDependency &d : scan.dependencies) {
    put_u32(out, uint32_t(d.path.size()));
    out += d.path;
    out += char(d.present);
    out.append(reinterpret_cast<const char *>(d.digest.data()), d.digest.size());
    for (uint64_t v : {d.stat.dev, d.stat.ino, d.stat.size, uint64_t(d.stat.mtime_ns),
                       uint64_t(d.stat.ctime_ns)}) {
      put_u32(out, uint32_t(v));
      put_u32(out, uint32_t(v >> 32));
    }
  }
  return out;
}

std::optional<IncludeScan> decode_manifest(std::string_view in) {
  MemoReader r(in);
  auto take = [&](size_t n) { return r.take(n); };
  auto u32 = [&] { return r.u32(); };
  auto u64 = [&] { return r.u64(); };
  IncludeScan scan;
  auto magic = take(4);
  auto why_size = magic && *magic == "PCM1" ? u32() : std::nullopt;
  auto why = why_size ? take(*why_size) : std::nullopt;
  auto time = why ? take(1) : std::nullopt;
  auto count = time ? u32() : std::nullopt;
  if (!count || *count > kMaxDependencies) return std::nullopt;
  scan.uncacheable = std::string(*why);
  scan.time_macros = (*time)[0] != 0;
  for (uint32_t i = 0; i < *count; ++i) {
    HeaderDependency d;
    auto path_size = u32();
    auto path = path_size ? take(*path_size) : std::nullopt;
    auto present = path ? take(1) : std::nullopt;
    auto digest = present ? take(32) : std::nullopt;
    std::optional<uint64_t> v[5];
    for (auto &x : v) x = digest ? u64() : std::nullopt;
    if (!v[4]) return std::nullopt;
    d.path = std::string(*path);
    d.present = (*present)[0] != 0;
    std::memcpy(d.digest.data(), digest->data(), 32);
    d.stat = {*v[0], *v[1], *v[2], int64_t(*v[3]), int64_t(*v[4])};
    scan.dependencies.push_back(std::move(d));
  }
  if (!r.at_end()) return std::nullopt;
  return scan;
}

ForkSafeMutex g_manifests_mutex{ForkSafeMutex::kInner};
std::unordered_map<std::string, std::shared_ptr<const IncludeScan>> g_manifests;

}  // namespace

IncludeScan scan_includes(const ProgramDesc &program, MemoStore *memos) {
  const std::string name = manifest_name(program);
  std::shared_ptr<const IncludeScan> earlier;
  {
    std::lock_guard lock(g_manifests_mutex);
    if (auto it = g_manifests.find(name); it != g_manifests.end()) earlier = it->second;
  }
  if (!earlier && memos)
    if (auto text = memos->load_memo(name))
      if (auto m = decode_manifest(*text)) earlier = std::make_shared<const IncludeScan>(*m);
  if (earlier && still_as_scanned(earlier->dependencies)) return *earlier;
  IncludeScan scan = Scanner(program, memos).run();
  bool racy = false;
  for (const HeaderDependency &d : scan.dependencies) racy |= d.recheck_content;
  if (!racy) {
    auto kept = std::make_shared<const IncludeScan>(scan);
    if (memos) memos->save_memo(name, encode_manifest(*kept));
    std::lock_guard lock(g_manifests_mutex);
    if (g_manifests.size() > 10000) g_manifests.clear();  // bound a long-lived process
    g_manifests[name] = std::move(kept);
  }
  return scan;
}

bool dependencies_unchanged(const IncludeScan &scan) {
  for (const HeaderDependency &dep : scan.dependencies) {
    struct stat st;
    const bool present = ::stat(dep.path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (present != dep.present) return false;
    if (!present) continue;
    if (!(StatIdentity::of(st) == dep.stat)) return false;
    if (dep.recheck_content) {
      Fd fd(::open(dep.path.c_str(), O_RDONLY | O_CLOEXEC));
      bool ok = false;
      const std::string data = fd ? read_all(fd.get(), uint64_t(st.st_size), &ok) : "";
      if (!ok || content_digest(data) != dep.digest) return false;
    }
  }
  return true;
}

}  // namespace progcache
