#include "core/observation.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "core/file_facts.hpp"
#include "core/opened_files.hpp"
#include "util/byte_io.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/open_index.hpp"
#include "util/paths.hpp"

namespace progcache {
namespace {

using Kind = NvrtcEvent::Kind;

// Placeholders for paths NVRTC derives from the setting: it stats the program name, its
// directory, the working directory and $PWD on every compile, so a program compiled under
// another (temporary) name or elsewhere asks the same questions of other paths.
constexpr std::string_view kName = "\x01name";
constexpr std::string_view kNameDir = "\x01name_dir";
constexpr std::string_view kCwd = "\x01cwd";
constexpr std::string_view kPwd = "\x01pwd";

// Names NVRTC probes for its own built-in headers; a file planted under them is never read
// (tests/observe_strace_test.py), so they are not inputs.
bool is_nvrtc_internal(std::string_view path) {
  return path == "__nv_nvrtc_builtin_header.h" || path == "__nv_name_map";
}

// EDG's scratch file ("/tmp/edg0_1234", under $TMPDIR), written and read back during a compile
// with precompiled headers: not an input.
bool is_scratch_file(std::string_view path) {
  const std::string base = base_name(path);
  if (base.rfind("edg", 0) != 0) return false;
  const size_t underscore = base.find('_');
  return underscore != std::string::npos && underscore > 3 &&
         base.find_first_not_of("0123456789", underscore + 1) == std::string::npos &&
         base.find_first_not_of("0123456789", 3) == underscore;
}

// A precompiled header NVRTC keeps for itself: never an input (NVRTC checks a PCH against the
// headers it was made from and makes the same output with or without it).
bool is_pch_file(std::string_view path, const ParsedOptions &opts) {
  if (!opts.pch) return false;
  if (path.size() > 4 && path.substr(path.size() - 4) == ".pch") return true;
  // -pch without --pch-dir: NVRTC makes its own directory in the temporary one
  // (/tmp/__nvrtc_auto_pch_<pid>_<n>), named by its process, never an input.
  if (path.find("/__nvrtc_auto_pch_") != std::string_view::npos) return true;
  for (const std::string &p : opts.pch_paths) {
    std::string_view dir = p;
    while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
    if (path == dir ||
        (path.size() > dir.size() && path.substr(0, dir.size()) == dir && path[dir.size()] == '/'))
      return true;
  }
  return false;
}

const std::string &concrete(const std::string &path, const CompileSetting &s) {
  static const std::string kNone;
  if (path == kName) return s.name;
  if (path == kNameDir) return s.name_dir;
  if (path == kCwd) return s.cwd;
  if (path == kPwd) return s.pwd ? *s.pwd : kNone;
  return path;
}

std::string shown_path(std::string_view path) {
  if (path == kName) return "<name>";
  if (path == kNameDir) return "<name dir>";
  if (path == kCwd) return "<cwd>";
  if (path == kPwd) return "<$PWD>";
  return std::string(path);
}

// The placeholder for a stat of a path the setting names, else the path itself.
std::string symbolic(const NvrtcEvent &e, const CompileSetting &s) {
  if (e.kind != Kind::stat && e.kind != Kind::lstat) return e.path;
  if (e.path == s.name) return std::string(kName);
  if (!s.name_dir.empty() && e.path == s.name_dir) return std::string(kNameDir);
  if (e.path == s.cwd) return std::string(kCwd);
  if (s.pwd && e.path == *s.pwd) return std::string(kPwd);
  return e.path;
}

bool contains(ByteView haystack, std::string_view needle) {
  if (needle.empty() || needle.size() > haystack.size) return false;
  const std::string_view h = haystack.str();
  return h.find(needle) != std::string_view::npos;
}

bool mentions(ByteView output, std::string_view log, std::string_view text) {
  return contains(output, text) || contains(ByteView(log), text);
}

// The texts __TIME__ ("15:22:11") and __DATE__ ("Nov 25 2026", "Nov  5 2026") would have been
// made of, from what NVRTC was told the time was (ctime's "Wed Nov 25 15:22:11 2026\n", or a
// broken-down time the recorder wrote out).
std::vector<std::string> time_texts(const std::string &t) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 8 <= t.size(); ++i)
    if (t[i + 2] == ':' && t[i + 5] == ':' && std::isdigit(uint8_t(t[i])) &&
        std::isdigit(uint8_t(t[i + 7])))
      out.push_back(t.substr(i, 8));
  static const char *const kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                        "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (const char *m : kMonths) {
    const size_t at = t.find(m);
    if (at == std::string::npos) continue;
    std::vector<long> numbers;  // after the month: the day, the time's parts, the year
    for (size_t k = at + 3; k < t.size();) {
      if (!std::isdigit(uint8_t(t[k]))) {
        ++k;
        continue;
      }
      numbers.push_back(std::strtol(t.c_str() + k, nullptr, 10));
      while (k < t.size() && std::isdigit(uint8_t(t[k]))) ++k;
    }
    if (numbers.empty()) continue;
    const auto year =
        std::find_if(numbers.begin() + 1, numbers.end(), [](long v) { return v >= 1900; });
    if (year == numbers.end()) continue;
    char date[40];
    std::snprintf(date, sizeof date, "%s %2ld %ld", m, numbers[0], *year);
    out.emplace_back(date);
  }
  return out;
}

std::string names_digest(const std::string &dir) {
  DIR *d = ::opendir(dir.c_str());
  if (!d) return "";
  std::vector<std::string> names;
  while (const dirent *e = ::readdir(d)) names.emplace_back(e->d_name);
  ::closedir(d);
  std::sort(names.begin(), names.end());
  std::string all;
  for (const std::string &n : names) all += n + '\0';
  const ContentDigest digest = content_digest(all);
  return std::string(digest.begin(), digest.end());
}

std::optional<std::string> resolve_now(const std::string &path, bool link) {
  if (link) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf);
    if (n < 0) return std::nullopt;
    return "link:" + std::string(buf, size_t(n));
  }
  char *r = ::realpath(path.c_str(), nullptr);
  if (!r) return std::nullopt;
  std::string out = r;
  std::free(r);
  return out;
}

// The facts of a file NVRTC read as it was then; null with *why when it is no longer that file.
FactsPtr facts_as_read(const NvrtcEvent &e, MemoStore *memos, std::string *why) {
  if (e.content_kept) return std::make_shared<const FileFacts>(facts_of_text(e.text));
  StatIdentity then;
  then.dev = e.dev;
  then.ino = e.ino;
  then.size = e.size;
  then.mtime_ns = e.mtime_ns;
  then.ctime_ns = e.ctime_ns;
  StatIdentity now;
  std::string error;
  FactsPtr facts = facts_of_file(e.path, then, memos, &now, &error);
  if (!facts) {
    *why = error;
  } else if (!(now == then)) {
    *why = "'" + e.path + "' changed while NVRTC compiled";
    facts = nullptr;
  }
  return facts;
}

class Interpreter {
 public:
  Interpreter(const ProgramDesc &program, const CompileSetting &setting, MemoStore *memos)
      : program_(program),
        opts_(program_options(program)),
        setting_(setting),
        memos_(memos),
        lexical_(program_lexical_facts(program)) {}

  // Adds one event; false (with why_) when the compile must not be stored.
  bool add(const NvrtcEvent &e) {
    switch (e.kind) {
      case Kind::env: {
        if (e.path == "PWD") return true;  // the logical directory: see dirs_matter
        if (e.has_text) lexical_ |= lexical_facts(e.text);  // NVRTC_APPEND_FLAGS=-DX=__TIME__
        if (e.path == "NVRTC_APPEND_FLAGS" && e.has_text && !e.text.empty()) appended_ = true;
        // Those NVRTC may read on its first compile only are in the identity, always.
        const auto &always = nvrtc_load_time_variables();
        if (std::find(always.begin(), always.end(), e.path) != always.end()) return true;
        obs_.environment.emplace_back(e.path, e.has_text ? std::optional(e.text) : std::nullopt);
        return true;
      }
      case Kind::cwd:
        return true;
      case Kind::time_text:
        times_.push_back(e.text);
        return true;
      default:
        break;
    }
    if (is_nvrtc_internal(e.path) || is_scratch_file(e.path) || is_pch_file(e.path, opts_))
      return true;
    if (e.kind == Kind::write)
      return fail("NVRTC wrote '" + e.path + "', which a cached result would not write");
    if (e.changed) return fail("'" + e.path + "' changed while NVRTC compiled");
    ObservedQuery q;
    q.kind = e.kind;
    q.path = symbolic(e, setting_);
    q.mode = e.kind == Kind::access ? e.mode : 0;
    q.error = e.error;
    q.file_type = e.kind == Kind::access ? 0 : e.mode;
    const bool found = e.error == 0 && (e.dev || e.ino) && e.kind != Kind::access;
    files_.push_back(found ? std::optional(std::pair{e.dev, e.ino}) : std::nullopt);
    if (e.kind == Kind::read && e.error == 0 && S_ISREG(e.mode)) {
      std::string why;
      const FactsPtr facts = facts_as_read(e, memos_, &why);
      if (!facts) return fail(why);
      q.digest = facts->digest;
      q.stat = {e.dev, e.ino, e.size, e.mtime_ns, e.ctime_ns};
      lexical_ |= facts->lexical;
    } else if (e.kind == Kind::list && e.error == 0) {
      q.text = names_digest(e.path);
    } else if (e.kind == Kind::resolve) {
      q.error = e.has_text ? 0 : 1;
      q.text = e.text;
    }
    obs_.queries.push_back(std::move(q));
    return true;
  }

  Interpretation finish(ByteView output, std::string_view log) {
    Interpretation r;
    if (!why_.empty()) {
      r.not_stored = why_;
      return r;
    }
    if (lexical_.uses_time()) {
      r.not_stored = "the source, an option or a header uses __DATE__ or __TIME__";
      return r;
    }
    for (const std::string &t : times_)
      for (const std::string &text : time_texts(t))
        if (mentions(output, log, text)) {
          r.not_stored = "the output holds the time of the compile (" + text + ")";
          return r;
        }
    // LLVM bitcode holds the name and the directory packed in bits: keyed whenever it may be.
    const bool bitcode = opts_.bitcode_output || program_.target == Target::ltoir || appended_;
    obs_.dirs_matter = bitcode || mentions(output, log, setting_.cwd) ||
                       (setting_.pwd && mentions(output, log, *setting_.pwd));
    // NVRTC stats the working directory, $PWD and "." only to choose which names the directory
    // in line and debug information: where the output holds neither, they are not inputs (a
    // stale $PWD, as `cmake -E chdir` leaves it, must not make another key).
    if (!obs_.dirs_matter) drop_directory_checks();
    link_same_files();
    for (const ObservedQuery &q : obs_.queries)
      if (q.path[0] != '\x01') note_literal(q.path);
    obs_.name_matters |=
        bitcode || lexical_.path_macro || mentions(output, log, setting_.name) || name_related();
    if (obs_.name_matters) obs_.name = setting_.name;
    if (obs_.name_dir_matters) obs_.name_dir = setting_.name_dir;
    if (obs_.dirs_matter) {
      obs_.cwd = setting_.cwd;
      obs_.pwd = setting_.pwd;
    }
    std::sort(obs_.environment.begin(), obs_.environment.end());
    obs_.environment.erase(std::unique(obs_.environment.begin(), obs_.environment.end()),
                           obs_.environment.end());
    r.observation = std::move(obs_);
    return r;
  }

 private:
  bool fail(std::string why) {
    if (why_.empty()) why_ = std::move(why);
    return false;
  }
  // A path NVRTC composed itself: beside the program name? (A bare name's directory is the
  // working directory, which every relative path is taken from.) The name's own file, used
  // for more than the stat NVRTC makes of it, makes the name part of the key.
  void note_literal(const std::string &path) {
    if (path == setting_.name) obs_.name_matters = true;
    if (setting_.name_dir.empty() ? !path.empty() && path[0] != '/'
                                  : path.rfind(setting_.name_dir + "/", 0) == 0)
      obs_.name_dir_matters = true;
  }
  void drop_directory_checks() {
    std::vector<ObservedQuery> kept;
    std::vector<std::optional<std::pair<uint64_t, uint64_t>>> kept_files;
    for (size_t i = 0; i < obs_.queries.size(); ++i) {
      const ObservedQuery &q = obs_.queries[i];
      const bool check = (q.kind == Kind::stat || q.kind == Kind::lstat) &&
                         (q.path == kCwd || q.path == kPwd || q.path == ".");
      if (check) continue;
      kept.push_back(q);
      kept_files.push_back(files_[i]);
    }
    obs_.queries = std::move(kept);
    files_ = std::move(kept_files);
  }
  // Which queries found one file: each points at the first that found it.
  void link_same_files() {
    std::map<std::pair<uint64_t, uint64_t>, int32_t> first;
    for (size_t i = 0; i < obs_.queries.size(); ++i) {
      obs_.queries[i].same_as = -1;
      if (!files_[i]) continue;
      auto [it, fresh] = first.emplace(*files_[i], int32_t(i));
      if (!fresh) obs_.queries[i].same_as = it->second;
    }
  }
  // The name's file is one of the files NVRTC read or probed by another path.
  bool name_related() const {
    for (size_t i = 0; i < obs_.queries.size(); ++i) {
      const ObservedQuery &q = obs_.queries[i];
      if (q.path == kName && q.same_as >= 0) return true;
      if (q.same_as >= 0 && obs_.queries[size_t(q.same_as)].path == kName) return true;
    }
    return false;
  }

  const ProgramDesc &program_;
  const ParsedOptions &opts_;
  const CompileSetting &setting_;
  MemoStore *memos_;
  Observation obs_;
  SourceFacts lexical_;
  std::vector<std::string> times_;
  std::vector<std::optional<std::pair<uint64_t, uint64_t>>> files_;  // per query: what it found
  bool appended_ = false;
  std::string why_;
};

// ---- asking again ----

struct Answer {
  int32_t error = 0, file_type = 0;
  uint64_t dev = 0, ino = 0;
  std::string text;
  bool found() const { return error == 0 && (dev || ino); }
};

// What stat(2) said of a path during one check: NVRTC stats each header just before it opens it,
// so the open's re-check may take the stat's word (a path found absent, a file opened before).
struct StatSeen {
  const std::string *path = nullptr;  // the check's (concrete) path; none: nothing seen yet
  int error = 0;
  struct stat st {};
  bool of(const std::string &p) const { return path && *path == p; }
};

Answer answer_of(const struct stat &st) {
  Answer a;
  a.file_type = int32_t(st.st_mode & S_IFMT);
  a.dev = uint64_t(st.st_dev);
  a.ino = uint64_t(st.st_ino);
  return a;
}

Answer stat_answer(const std::string &path, bool link, StatSeen *seen) {
  struct stat st;
  if ((link ? ::lstat(path.c_str(), &st) : ::stat(path.c_str(), &st)) != 0) {
    Answer a;
    a.error = errno;
    if (!link) *seen = StatSeen{&path, a.error, {}};
    return a;
  }
  if (!link) *seen = StatSeen{&path, 0, st};
  return answer_of(st);
}

// What an open of path for reading finds in one check: 0 and the file's stat, or the errno the
// open fails with. Settled by the stat just made of the same path where that is enough: a path
// that does not resolve (open resolves it as stat does), or a regular file this process opened
// before, under the same credentials, as the same unchanged file (core/opened_files.hpp). Else
// opened, and the descriptor's fstat says what it opened (and what the memo may vouch for).
class OpenCheck {
 public:
  int open_stat(const std::string &path, const StatSeen &seen, struct stat *st) {
    if (seen.of(path) && (seen.error == ENOENT || seen.error == ENOTDIR)) return seen.error;
    if (seen.of(path) && seen.error == 0 && S_ISREG(seen.st.st_mode) &&
        opened_before(path, StatIdentity::of(seen.st), credentials())) {
      *st = seen.st;
      return 0;
    }
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return errno;
    if (::fstat(fd.get(), st) != 0) return -1;  // never an answer NVRTC was given
    if (S_ISREG(st->st_mode)) remember_opened(path, StatIdentity::of(*st), credentials());
    return 0;
  }

 private:
  const AccessCredentials &credentials() {
    if (!credentials_) credentials_ = AccessCredentials::current();
    return *credentials_;
  }
  std::optional<AccessCredentials> credentials_;
};

// Opens path as NVRTC would read it; the content's digest must be q's.
bool read_holds(const ObservedQuery &q, const std::string &path, const StatSeen &seen,
                OpenCheck &opens, MemoStore *memos, Answer *a, std::string *why) {
  struct stat st;
  if (const int error = opens.open_stat(path, seen, &st); error != 0) {
    a->error = error;
    return q.error == error;
  }
  *a = answer_of(st);
  if (q.error != 0 || a->file_type != q.file_type) return false;
  if (!S_ISREG(st.st_mode)) return true;
  const StatIdentity now = StatIdentity::of(st);
  if (now == q.stat && !now.is_racy()) return true;  // the same file as then, unchanged
  StatIdentity read;
  std::string error;
  const FactsPtr facts = facts_of_file(path, now, memos, &read, &error);
  if (facts && facts->digest == q.digest) return true;
  *why = "header " + path + (facts ? " changed" : " cannot be read: " + error);
  return false;
}

// Which query of a check first found each file, by its device and inode (16 bytes, kept per
// query) in an open-addressing index sized by the check, where a std::map's node per file was a
// fifth of a warm hit's work.
class FirstToFind {
 public:
  explicit FirstToFind(size_t queries) : files_(queries), index_(FileOf{&files_}) {}
  FirstToFind(const FirstToFind &) = delete;
  FirstToFind &operator=(const FirstToFind &) = delete;
  // The first query that found (dev, ino), or -1 after recording index as that query.
  int32_t first_or_add(uint64_t dev, uint64_t ino, int32_t index) {
    std::array<char, 16> &file = files_[size_t(index)];
    std::memcpy(file.data(), &dev, 8);
    std::memcpy(file.data() + 8, &ino, 8);
    const std::string_view key(file.data(), file.size());
    const uint64_t hash = index_.hash_of(key);
    if (const int32_t *first = index_.find(key, hash)) return *first;
    index_.insert(index, hash);
    return -1;
  }

 private:
  struct FileOf {
    const std::vector<std::array<char, 16>> *files;
    std::string_view operator()(int32_t i) const {
      const std::array<char, 16> &f = (*files)[size_t(i)];
      return {f.data(), f.size()};
    }
  };
  std::vector<std::array<char, 16>> files_;
  OpenIndex<int32_t, FileOf> index_;
};

std::string describe(const ObservedQuery &q, const std::string &path) {
  const std::string what = q.kind == Kind::read ? "header " : "path ";
  if (q.error == ENOENT) return "a file now exists at " + path + ", where NVRTC found none";
  if (q.error != 0) return what + path + " is now there (it was not)";
  return what + path + " is no longer as it was";
}

}  // namespace

SourceFacts program_lexical_facts(const ProgramDesc &program) {
  SourceFacts f = lexical_facts(program.source.str());
  for (const auto &[name, text] : program.headers) f |= lexical_facts(text);
  for (std::string_view o : program.options) f |= lexical_facts(o);
  return f;
}

CompileSetting current_setting(const ProgramDesc &program) {
  CompileSetting s;
  s.name = std::string(program.name);
  s.name_dir = dir_part(s.name);
  if (s.name_dir.size() > 1) s.name_dir.pop_back();  // "sub/" -> "sub"; "/" stays
  char cwd[PATH_MAX];
  s.cwd = ::getcwd(cwd, sizeof cwd) ? cwd : "";
  if (const char *pwd = std::getenv("PWD")) s.pwd = pwd;
  return s;
}

Interpretation interpret(const NvrtcObservation &recorded, const ProgramDesc &program,
                         const CompileSetting &setting, MemoStore *memos, ByteView output,
                         std::string_view log, bool ok) {
  Interpretation r;
  if (std::string why = recorded.incomplete(); !why.empty()) {
    r.not_stored = why;
    return r;
  }
  const std::vector<NvrtcEvent> events = recorded.events();
  if (events.empty()) {
    r.not_stored = "NVRTC's calls could not be observed";
    return r;
  }
  if (ok && !recorded.saw_compiler()) {
    r.not_stored = "NVRTC's front end could not be observed";
    return r;
  }
  Interpreter in(program, setting, memos);
  for (const NvrtcEvent &e : events)
    if (!in.add(e)) break;
  return in.finish(output, log);
}

bool holds(const Observation &o, const CompileSetting &s, MemoStore *memos, std::string *why) {
  std::string reason;
  auto differs = [&](std::string text) {
    if (why) *why = std::move(text);
    return false;
  };
  if (o.name_matters && s.name != o.name)
    return differs("the program name (" + o.name + " then, " + s.name + " now)");
  if (o.name_dir_matters && s.name_dir != o.name_dir)
    return differs("the program name's directory (" + o.name_dir + " then, " + s.name_dir +
                   " now)");
  if (o.dirs_matter && (s.cwd != o.cwd || s.pwd != o.pwd))
    return differs("the working directory (" + o.cwd + " then, " + s.cwd + " now)");
  for (const auto &[name, value] : o.environment) {
    const char *now = std::getenv(name.c_str());
    if (value.has_value() != (now != nullptr) || (now && *value != now))
      return differs("the variable " + name);
  }
  FirstToFind first(o.queries.size());
  StatSeen seen;
  OpenCheck opens;
  for (size_t i = 0; i < o.queries.size(); ++i) {
    const ObservedQuery &q = o.queries[i];
    const std::string &path = concrete(q.path, s);
    Answer a;
    switch (q.kind) {
      case Kind::stat:
      case Kind::lstat:
        a = stat_answer(path, q.kind == Kind::lstat, &seen);
        if (a.error != q.error || a.file_type != q.file_type) return differs(describe(q, path));
        break;
      case Kind::access:
        if ((::access(path.c_str(), q.mode) == 0 ? 0 : errno) != q.error)
          return differs(describe(q, path));
        break;
      case Kind::read:
        if (!read_holds(q, path, seen, opens, memos, &a, &reason))
          return differs(reason.empty() ? describe(q, path) : reason);
        break;
      case Kind::list: {
        DIR *d = ::opendir(path.c_str());
        const int32_t error = d ? 0 : errno;
        if (d) ::closedir(d);
        if (error != q.error || (error == 0 && names_digest(path) != q.text))
          return differs("the names in directory " + path);
        break;
      }
      case Kind::resolve: {
        const auto text = resolve_now(path, q.text.rfind("link:", 0) == 0);
        if (int32_t(text ? 0 : 1) != q.error || (text && *text != q.text))
          return differs("where " + path + " leads");
        break;
      }
      default:
        return differs("an observation this version cannot check");
    }
    const int32_t same_as = a.found() ? first.first_or_add(a.dev, a.ino, int32_t(i)) : -1;
    if (same_as != q.same_as)
      return differs(path + (same_as >= 0 ? " is now" : " is no longer") + " the same file as " +
                     concrete(o.queries[size_t(same_as >= 0 ? same_as : q.same_as)].path, s));
  }
  return true;
}

std::vector<KeyField> observation_fields(const Observation &o, bool with_shown) {
  std::vector<KeyField> fields;
  fields.reserve(o.queries.size() + o.environment.size() + 4);
  static const char *const kWords[] = {"probe", "lprobe",  "access", "file", "write",
                                       "list",  "resolve", "env",    "cwd",  "time"};
  for (const ObservedQuery &q : o.queries) {
    KeyField &f = fields.emplace_back();
    switch (q.kind) {
      case Kind::read:
        f.tag = kFieldRead;
        break;
      case Kind::lstat:
        f.tag = kFieldLinkProbe;
        break;
      case Kind::access:
        f.tag = kFieldAccess;
        break;
      case Kind::list:
        f.tag = kFieldList;
        break;
      case Kind::resolve:
        f.tag = kFieldResolve;
        break;
      default:
        f.tag = kFieldProbe;
        break;
    }
    const std::string path = shown_path(q.path);
    f.name.reserve(16 + path.size());
    f.name += kWords[int(q.kind)];
    if (q.kind == Kind::access) f.name += "(" + std::to_string(q.mode) + ")";
    f.name += ' ';
    f.name += path;
    ByteWriter w;
    w.u32(uint32_t(q.error));
    w.u32(uint32_t(q.file_type));
    w.u32(uint32_t(q.same_as));
    if (q.kind == Kind::read && q.error == 0 && S_ISREG(q.file_type))
      w.bytes(std::string_view(reinterpret_cast<const char *>(q.digest.data()), q.digest.size()));
    w.str(q.text);
    f.value = w.take();
    if (!with_shown) continue;
    if (q.error == ENOENT || q.error == ENOTDIR) {
      f.shown = "absent";
    } else if (q.error != 0) {
      f.shown = "error " + std::to_string(q.error);
    } else if (q.kind == Kind::read && S_ISREG(q.file_type)) {
      f.shown = to_hex(ByteView(q.digest.data(), q.digest.size()));
    } else if (q.kind == Kind::resolve) {
      f.shown = q.text;
    } else {
      f.shown = S_ISDIR(q.file_type) ? "directory" : S_ISREG(q.file_type) ? "present" : "other";
    }
    if (q.same_as >= 0)
      f.shown += ", the same file as " + shown_path(o.queries[size_t(q.same_as)].path);
  }
  for (const auto &[name, value] : o.environment)
    fields.push_back({kFieldEnvironment, "env " + name, value ? "=" + *value : "unset",
                      value.value_or("unset")});
  if (o.name_matters) fields.push_back({kFieldName, "name", o.name, o.name});
  if (o.name_dir_matters) fields.push_back({kFieldNameDir, "name_dir", o.name_dir, o.name_dir});
  if (o.dirs_matter) {
    fields.push_back({kFieldWorkingDir, "working_dir", o.cwd, o.cwd});
    fields.push_back(
        {kFieldWorkingDir, "pwd", o.pwd ? "=" + *o.pwd : "unset", o.pwd.value_or("unset")});
  }
  return fields;
}

std::vector<std::pair<std::string, bool>> observed_paths(const Observation &o,
                                                         const CompileSetting &s) {
  std::vector<std::pair<std::string, bool>> out;
  for (const ObservedQuery &q : o.queries) {
    const bool header_like = q.kind == Kind::read || q.kind == Kind::stat || q.kind == Kind::access;
    if (q.path[0] == '\x01' || !header_like || (q.error == 0 && S_ISDIR(q.file_type))) continue;
    const std::string &path = concrete(q.path, s);
    if (std::none_of(out.begin(), out.end(), [&](const auto &p) { return p.first == path; }))
      out.emplace_back(path, q.error == 0);
  }
  return out;
}

// ---- the manifest ----

namespace {

// PCO3: each observation followed by its entry's key, where known (a flag, then 32 bytes). PCO2
// manifests, which hold no keys, are still read: their keys are derived again.
constexpr std::string_view kManifestMagic = "PCO3", kKeylessManifestMagic = "PCO2";
constexpr size_t kMaxQueries = 200000;

// Each query: its kind, its path as the length it shares with the previous query's path and the
// rest (NVRTC probes the same directories over and over), then the answer. Reads add the digest
// and (with_hints) the stat identity; resolve and list their text.
void write_observation(ByteWriter &w, const Observation &o, bool with_hints) {
  w.varint(o.queries.size());
  std::string_view previous;
  for (const ObservedQuery &q : o.queries) {
    size_t shared = 0;
    while (shared < previous.size() && shared < q.path.size() && previous[shared] == q.path[shared])
      ++shared;
    w.u8(uint8_t(q.kind));
    w.varint(shared);
    w.varint(q.path.size() - shared);
    w.bytes(std::string_view(q.path).substr(shared));
    previous = q.path;
    w.varint(uint32_t(q.error));
    w.varint(uint32_t(q.file_type));
    w.varint(uint64_t(int64_t(q.same_as) + 1));
    if (q.kind == Kind::access) w.varint(uint32_t(q.mode));
    if (q.kind == Kind::read && q.error == 0) {
      w.bytes(std::string_view(reinterpret_cast<const char *>(q.digest.data()), q.digest.size()));
      if (with_hints)
        for (uint64_t v : {q.stat.dev, q.stat.ino, q.stat.size, uint64_t(q.stat.mtime_ns),
                           uint64_t(q.stat.ctime_ns)})
          w.varint(v);
    }
    if (q.kind == Kind::resolve || q.kind == Kind::list) w.str(q.text);
  }
  w.varint(o.environment.size());
  for (const auto &[name, value] : o.environment) {
    w.str(name);
    w.u8(value.has_value());
    w.str(value.value_or(""));
  }
  w.u8(uint8_t(o.name_matters | o.name_dir_matters << 1 | o.dirs_matter << 2 |
               o.pwd.has_value() << 3));
  w.str(o.name);
  w.str(o.name_dir);
  w.str(o.cwd);
  w.str(o.pwd.value_or(""));
}

std::optional<Observation> read_observation(ByteReader &r, bool with_hints) {
  Observation o;
  const uint64_t n = r.varint();
  if (r.failed() || n > kMaxQueries) return std::nullopt;
  std::string previous;
  for (uint64_t i = 0; i < n && !r.failed(); ++i) {
    ObservedQuery q;
    const uint8_t kind = r.u8();
    if (kind > uint8_t(Kind::resolve) || kind == uint8_t(Kind::write)) r.fail();
    q.kind = Kind(kind);
    const uint64_t shared = r.varint(), rest = r.varint();
    if (shared > previous.size()) r.fail();
    q.path = previous.substr(0, r.failed() ? 0 : size_t(shared));
    q.path += r.bytes(r.failed() ? 0 : size_t(rest));
    q.error = int32_t(r.varint());
    q.file_type = int32_t(r.varint());
    q.same_as = int32_t(int64_t(r.varint()) - 1);
    if (q.same_as < -1 || q.same_as >= int32_t(i) || q.path.empty()) r.fail();
    if (q.kind == Kind::access) q.mode = int32_t(r.varint());
    if (q.kind == Kind::read && q.error == 0) {
      const std::string_view digest = r.bytes(q.digest.size());
      if (!r.failed()) std::memcpy(q.digest.data(), digest.data(), q.digest.size());
      if (with_hints) {
        q.stat.dev = r.varint();
        q.stat.ino = r.varint();
        q.stat.size = r.varint();
        q.stat.mtime_ns = int64_t(r.varint());
        q.stat.ctime_ns = int64_t(r.varint());
      }
    }
    if (q.kind == Kind::resolve || q.kind == Kind::list) q.text = std::string(r.str());
    previous = q.path;
    o.queries.push_back(std::move(q));
  }
  const uint64_t vars = r.varint();
  if (vars > kMaxQueries) r.fail();
  for (uint64_t i = 0; i < vars && !r.failed(); ++i) {
    std::string name(r.str());
    const bool set = r.u8() != 0;
    std::string value(r.str());
    o.environment.emplace_back(std::move(name),
                               set ? std::optional(std::move(value)) : std::nullopt);
  }
  const uint8_t flags = r.u8();
  if (flags > 15) r.fail();
  o.name_matters = flags & 1;
  o.name_dir_matters = flags & 2;
  o.dirs_matter = flags & 4;
  o.name = std::string(r.str());
  o.name_dir = std::string(r.str());
  o.cwd = std::string(r.str());
  std::string pwd(r.str());
  if (flags & 8) o.pwd = std::move(pwd);
  if (r.failed()) return std::nullopt;
  return o;
}

std::string canonical_text(const Observation &o) {
  ByteWriter w;
  write_observation(w, o, false);
  return w.take();
}

ForkSafeMutex g_manifests_mutex{ForkSafeMutex::kInner};
std::unordered_map<std::string, std::shared_ptr<const Manifest>> g_manifests;

void remember(const std::string &name, std::shared_ptr<const Manifest> m) {
  std::lock_guard lock(g_manifests_mutex);
  if (g_manifests.size() > 10000) g_manifests.clear();  // bound a long-lived process
  g_manifests[name] = std::move(m);
}

ForkSafeMutex g_derived_keys_mutex{ForkSafeMutex::kInner};

}  // namespace

DerivedKeys &DerivedKeys::operator=(const DerivedKeys &other) {
  if (this != &other) {
    std::lock_guard lock(g_derived_keys_mutex);
    keys_.clear();
  }
  return *this;
}

std::optional<Key> Manifest::key_of(size_t index) const {
  if (index < keys.size() && keys[index]) return keys[index];
  return derived_keys.find(index);
}

std::optional<Key> DerivedKeys::find(size_t index) const {
  std::lock_guard lock(g_derived_keys_mutex);
  return index < keys_.size() ? keys_[index] : std::nullopt;
}

void DerivedKeys::remember(size_t index, const Key &key) const {
  if (index >= kMaxObservations) return;
  std::lock_guard lock(g_derived_keys_mutex);
  if (keys_.size() <= index) keys_.resize(index + 1);
  keys_[index] = key;
}

std::string manifest_name(const Key &identity) {
  return "observed/" + to_hex(ByteView(identity.data(), identity.size()));
}

std::string encode_manifest(const Manifest &m) {
  ByteWriter w;
  w.bytes(kManifestMagic);
  w.varint(m.observations.size());
  for (size_t i = 0; i < m.observations.size(); ++i) {
    write_observation(w, m.observations[i], true);
    const std::optional<Key> key = m.key_of(i);
    w.u8(key.has_value());
    if (key) w.bytes(std::string_view(reinterpret_cast<const char *>(key->data()), key->size()));
  }
  return w.take();
}

std::optional<Manifest> decode_manifest(std::string_view text) {
  ByteReader r(text);
  const std::string_view magic = r.bytes(kManifestMagic.size());
  const bool with_keys = magic == kManifestMagic;
  if (!with_keys && magic != kKeylessManifestMagic) return std::nullopt;
  const uint64_t n = r.varint();
  if (r.failed() || n > kMaxObservations) return std::nullopt;
  Manifest m;
  for (uint64_t i = 0; i < n; ++i) {
    auto o = read_observation(r, true);
    if (!o) return std::nullopt;
    m.observations.push_back(std::move(*o));
    std::optional<Key> &key = m.keys.emplace_back();
    const uint8_t has_key = with_keys ? r.u8() : 0;
    if (has_key > 1) return std::nullopt;
    if (has_key) {
      const std::string_view bytes = r.bytes(kKeySize);
      if (r.failed()) return std::nullopt;
      std::memcpy(key.emplace().data(), bytes.data(), kKeySize);
    }
  }
  if (!r.done()) return std::nullopt;
  return m;
}

namespace {

void store_first(MemoStore *memos, const std::string &name, const Observation &observation,
                 const Key &key, const Manifest &current) {
  auto updated = std::make_shared<Manifest>();
  updated->observations.push_back(observation);
  updated->keys.emplace_back(key);
  const std::string mine = canonical_text(observation);
  for (size_t i = 0; i < current.observations.size(); ++i) {
    const Observation &o = current.observations[i];
    if (updated->observations.size() < kMaxObservations && canonical_text(o) != mine) {
      updated->observations.push_back(o);
      updated->keys.push_back(current.key_of(i));
    }
  }
  if (memos) memos->save_memo(name, encode_manifest(*updated));
  remember(name, std::move(updated));
}

std::shared_ptr<const Manifest> load_named(MemoStore *memos, const std::string &name) {
  if (memos)
    if (auto text = memos->load_memo(name))
      if (auto decoded = decode_manifest(*text))
        return std::make_shared<const Manifest>(std::move(*decoded));
  return std::make_shared<const Manifest>();
}

}  // namespace

std::shared_ptr<const Manifest> load_manifest(MemoStore *memos, const Key &identity, bool fresh) {
  const std::string name = manifest_name(identity);
  if (!fresh) {
    std::lock_guard lock(g_manifests_mutex);
    if (auto it = g_manifests.find(name); it != g_manifests.end()) return it->second;
  }
  auto m = load_named(memos, name);
  remember(name, m);
  return m;
}

void add_observation(MemoStore *memos, const Key &identity, const Observation &observation,
                     const Key &key) {
  const std::string name = manifest_name(identity);
  store_first(memos, name, observation, key, *load_named(memos, name));
}

bool merge_manifest(MemoStore *memos, std::string_view name, std::string_view text) {
  constexpr std::string_view kPrefix = "observed/";
  if (name.size() != kPrefix.size() + 2 * kKeySize || name.substr(0, kPrefix.size()) != kPrefix ||
      name.find_first_not_of("0123456789abcdef", kPrefix.size()) != std::string_view::npos)
    return false;
  const auto incoming = decode_manifest(text);
  if (!incoming) return false;
  const std::string n(name);
  for (size_t i = incoming->observations.size(); i-- > 0;) {
    // Ours stay first: an imported observation is filed behind the ones this cache made.
    Manifest merged = *load_named(memos, n);
    const std::string theirs = canonical_text(incoming->observations[i]);
    if (std::any_of(merged.observations.begin(), merged.observations.end(),
                    [&](const Observation &o) { return canonical_text(o) == theirs; }))
      continue;
    if (merged.observations.size() >= kMaxObservations) break;
    merged.observations.push_back(incoming->observations[i]);
    merged.keys.push_back(incoming->keys[i]);
    if (memos) memos->save_memo(n, encode_manifest(merged));
    remember(n, std::make_shared<const Manifest>(std::move(merged)));
  }
  return true;
}

}  // namespace progcache
