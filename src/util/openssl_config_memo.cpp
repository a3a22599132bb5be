#include "util/openssl_config_memo.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "util/fsutil.hpp"
#include "util/hex.hpp"
#include "util/trust.hpp"
#include "util/uri.hpp"
#include "util/xxhash.hpp"

namespace progcache {

namespace {

constexpr uint64_t kMaxConfigBytes = 1 << 20;
// The two verdicts differ in every byte but the newline: no flipped bit turns "skip the file"
// into "load it" or back, it makes a memo that is not believed.
constexpr char kLoad[] = "load\n", kSkip[] = "skip\n";
constexpr size_t kVerdictSize = sizeof kLoad - 1;
static_assert(sizeof kLoad == sizeof kSkip);

// Whether pos, in text, lies inside a comment: after a '#' on its line with no quote or backslash
// before that '#' (a conservative reading: a '#' that might be quoted or escaped counts as code).
bool in_comment(std::string_view text, size_t pos) {
  const size_t newline = text.rfind('\n', pos);
  const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  const std::string_view before = text.substr(line_start, pos - line_start);
  const size_t hash = before.find('#');
  return hash != std::string_view::npos &&
         before.substr(0, hash).find_first_of("\"'\\") == std::string_view::npos;
}

// Whether the file's text alone decides what OpenSSL makes of it: no "include" nor "env::", in
// any case, outside a comment, and no line continued by a backslash. Searched in a lowercase
// copy, so a 12 KB file costs a few thousand instructions (a case-folding search per line cost
// a fresh process 0.25M).
bool self_contained(std::string_view text) {
  std::string lower(text);
  for (char &c : lower)  // branch-free, so that it vectorises
    c = char(c + (static_cast<unsigned char>(c - 'A') < 26u) * ('a' - 'A'));
  const std::string_view t(lower);
  // memmem, not string_view::find: libstdc++'s find compares at every position.
  auto find = [&](std::string_view word, size_t from) -> size_t {
    const void *hit = ::memmem(t.data() + from, t.size() - from, word.data(), word.size());
    return hit ? size_t(static_cast<const char *>(hit) - t.data()) : std::string_view::npos;
  };
  for (const std::string_view word : {"include", "env::"})
    for (size_t at = find(word, 0); at != std::string_view::npos; at = find(word, at + 1))
      if (!in_comment(t, at)) return false;
  for (size_t at = t.find('\\'); at != std::string_view::npos; at = t.find('\\', at + 1)) {
    const std::string_view rest = t.substr(at + 1);
    if (rest.empty() || rest[0] == '\n' || rest.substr(0, 2) == "\r\n") return false;
  }
  return true;
}

constexpr std::string_view kMemoPrefix = "openssl-conf-", kTempInfix = ".tmp.";

// Removes the temporary files of memos whose writer died before its rename (a SIGKILL between
// the two): nothing else ever would. A writer is known by the pid its file is named with, and
// only a pid that no longer exists is reaped (a live writer's file is its own; a reused pid
// leaves a file of at most 5 bytes for a later reap).
void reap_abandoned_temporaries(const std::string &dir) {
  const Fd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir_fd) return;
  for (const std::string &name : names_in_dir(dir_fd.get())) {
    const size_t infix = name.rfind(kTempInfix);
    if (name.rfind(kMemoPrefix, 0) != 0 || infix == std::string::npos) continue;
    const std::string pid_text = name.substr(infix + kTempInfix.size());
    char *end = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end, 10);
    if (pid_text.empty() || *end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    if (::kill(pid_t(pid), 0) != 0 && errno == ESRCH) ::unlinkat(dir_fd.get(), name.c_str(), 0);
  }
}

}  // namespace

OpensslConfigMemo::OpensslConfigMemo(const char *file, unsigned long openssl_version) {
  if (!file || process_is_privileged()) return;
  dir_ = user_cache_dir();
  std::string &text = text_;
  // Only an absolute directory: a relative $HOME would file the memo by the working directory.
  if (dir_.empty() || dir_[0] != '/' || !read_whole_file(file, &text, kMaxConfigBytes)) return;
  const uint64_t version = openssl_version;
  std::string named(reinterpret_cast<const char *>(&version), sizeof version);
  named.append(file, std::char_traits<char>::length(file) + 1);  // with its terminating NUL
  named += text;
  const std::array<uint8_t, 16> digest = xxh3_128(named.data(), named.size());
  path_ = dir_ + "/" + std::string(kMemoPrefix) + to_hex(ByteView(digest.data(), digest.size()));
}

std::optional<bool> OpensslConfigMemo::recall() const {
  struct stat dir;  // whoever may write the directory could swap the memo for another
  if (path_.empty() || ::stat(dir_.c_str(), &dir) != 0 || !owned_and_private(dir))
    return std::nullopt;
  Fd fd(::open(path_.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  struct stat st;
  char verdict[sizeof kLoad] = {};
  if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !owned_and_private(st) ||
      st.st_size != kVerdictSize || !pread_all(fd.get(), verdict, kVerdictSize, 0))
    return std::nullopt;
  if (std::memcmp(verdict, kLoad, kVerdictSize) == 0) return true;
  if (std::memcmp(verdict, kSkip, kVerdictSize) == 0) return false;
  return std::nullopt;
}

void OpensslConfigMemo::remember(bool matters) const {
  if (path_.empty() || !self_contained(text_)) return;
  try {
    make_dirs(dir_, 0700);
  } catch (...) {  // no cache directory to be had: the next process asks OpenSSL again
    return;
  }
  reap_abandoned_temporaries(dir_);  // remembering is rare: once per file, OpenSSL and user
  const std::string temp = path_ + std::string(kTempInfix) + std::to_string(::getpid());
  Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return;
  const bool written =
      write_all(fd.get(), matters ? kLoad : kSkip, kVerdictSize) && ::close(fd.release()) == 0;
  if (!written || ::rename(temp.c_str(), path_.c_str()) != 0) ::unlink(temp.c_str());
}

}  // namespace progcache
