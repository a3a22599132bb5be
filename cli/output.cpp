// Helpers every command uses: calling the library, formatting, files, progress.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

#include "cli.hpp"

namespace progcache::cli {

std::string library_message() {
  std::string message = pcache_last_error();
  // "pcache_open: cannot create ...": the function name means nothing to a person at a shell.
  if (message.rfind("pcache_", 0) == 0) {
    const size_t colon = message.find(": ");
    if (colon != std::string::npos && message.find(' ') > colon) message.erase(0, colon + 2);
  }
  for (char &c : message)
    if (c == '\n') c = ' ';
  return message;
}

pcache_status check(pcache_status status) {
  if (status < 0) throw Failure(status, library_message());
  static std::string last_warning;  // one warning once, however many calls repeat it
  const std::string warning = library_message();
  if (!warning.empty() && warning != last_warning) {
    std::fprintf(stderr, "progcache: warning: %s\n", warning.c_str());
    last_warning = warning;
  }
  return status;
}

void CloseCache::operator()(pcache *cache) const {
  if (pcache_close(cache) != PCACHE_OK)
    std::fprintf(stderr, "progcache: warning: %s\n", library_message().c_str());
}

CacheHandle open_cache(const std::string &uri, uint64_t cap, bool must_exist) {
  pcache_options options{};
  check(pcache_options_init(&options, sizeof options));
  options.max_size_bytes = cap;
  if (must_exist) options.flags |= PCACHE_OPEN_EXISTING;
  pcache *cache = nullptr;
  const pcache_status status = pcache_open(uri.empty() ? nullptr : uri.c_str(), &options, &cache);
  if (status == PCACHE_NOT_FOUND) throw Failure(status, library_message());
  check(status);
  return CacheHandle(cache);
}

EntryHandle peek_entry(pcache *cache, std::string_view key) {
  pcache_entry *entry = nullptr;
  const pcache_status s = pcache_admin_peek(cache, key.data(), key.size(), &entry);
  if (s == PCACHE_ERR_CORRUPT) {
    std::fprintf(stderr, "progcache: warning: %s\n", library_message().c_str());
    return nullptr;
  }
  check(s);
  return EntryHandle(entry);
}

std::vector<ListedEntry> list_entries(pcache *cache) {
  std::vector<ListedEntry> out;
  check(pcache_admin_list(
      cache,
      [](const pcache_entry_info *e, void *context) {
        static_cast<std::vector<ListedEntry> *>(context)->push_back(
            {std::string(static_cast<const char *>(e->key), e->key_size), e->payload_size,
             e->last_use});
        return 0;
      },
      &out));
  return out;
}

pcache_admin_info cache_info(pcache *cache) {
  pcache_admin_info info{};
  info.struct_size = sizeof info;
  check(pcache_admin_info_get(cache, &info));
  return info;
}

uint64_t entry_count(pcache *cache) {
  uint64_t n = 0;
  check(pcache_count(cache, &n));
  return n;
}

std::string Invocation::value(const std::string &option, const std::string &fallback) const {
  const auto it = options.find(option);
  return it == options.end() || it->second.empty() ? fallback : it->second.back();
}

std::string human_size(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

std::string milliseconds(uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", double(us) / 1000.0);
  return buf;
}

std::string nvrtc_text(uint32_t v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

std::string to_hex(const void *data, size_t size) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(size * 2);
  for (size_t i = 0; i < size; ++i) {
    const auto b = static_cast<const unsigned char *>(data)[i];
    out += digits[b >> 4];
    out += digits[b & 15];
  }
  return out;
}

std::string show_key(std::string_view key) {
  bool printable = !key.empty();
  for (unsigned char c : key) printable &= c >= 0x20 && c <= 0x7e;
  return printable ? "text:" + std::string(key) : to_hex(key.data(), key.size());
}

std::string parse_key(const std::string &text) {
  if (text.rfind("text:", 0) == 0) return text.substr(5);
  if (text.size() % 2 || text.empty() ||
      text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw Usage("KEY '" + text + "' is neither hex nor text:STRING");
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2)
    out.push_back(char(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

namespace {

std::string io_failure(const char *verb, const std::string &name, int error) {
  return std::string("cannot ") + verb + " " + name + ": " + std::strerror(error);
}

std::string quoted_or_stdio(const std::string &path, const char *stdio_name) {
  return path == "-" ? stdio_name : "'" + path + "'";
}

}  // namespace

// With read(2), not a stream: a stream reads a directory, or a file whose read fails midway, as
// a short file without a word, and put or compile would then store or build the wrong bytes.
std::string read_file(const std::string &path) {
  const std::string name = quoted_or_stdio(path, "standard input");
  const OwnedFd in{path == "-" ? STDIN_FILENO : ::open(path.c_str(), O_RDONLY | O_CLOEXEC),
                   path != "-"};
  if (in.fd < 0) throw Failure(PCACHE_ERR_IO, io_failure("read", name, errno));
  struct stat st {};
  if (::fstat(in.fd, &st) != 0) throw Failure(PCACHE_ERR_IO, io_failure("read", name, errno));
  if (S_ISDIR(st.st_mode)) throw Failure(PCACHE_ERR_IO, io_failure("read", name, EISDIR));
  std::string out;
  // A regular file is read in one call of its size (plus one to see its end); anything else
  // (a pipe, a terminal, a file that grows) in growing steps.
  size_t want = S_ISREG(st.st_mode) && st.st_size > 0 ? size_t(st.st_size) + 1 : 64 * 1024;
  for (;;) {
    const size_t have = out.size();
    out.resize(have + want);
    const ssize_t n = ::read(in.fd, out.data() + have, want);
    if (n < 0 && errno == EINTR) {
      out.resize(have);
      continue;
    }
    if (n < 0) throw Failure(PCACHE_ERR_IO, io_failure("read", name, errno));
    out.resize(have + size_t(n));
    if (n == 0) return out;
    // A short read is most likely the end (the next read says so); a full one, more to come.
    want = size_t(n) < want ? 64 * 1024 : std::max<size_t>(64 * 1024, out.size());
  }
}

// Written with write(2) so that the error named is the one that stopped it; a regular file that
// could not be written whole is removed, as a compiler removes its output, so that no truncated
// cubin is left for a build to pick up.
void write_file(const std::string &path, const void *data, size_t size) {
  const std::string name = quoted_or_stdio(path, "standard output");
  const bool to_stdout = path == "-";
  OwnedFd out{to_stdout ? STDOUT_FILENO
                        : ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666),
              !to_stdout};
  if (out.fd < 0) throw Failure(PCACHE_ERR_IO, io_failure("write", name, errno));
  if (to_stdout) std::fflush(stdout);  // what the command printed before stays before
  const auto *p = static_cast<const char *>(data);
  int error = 0;
  for (size_t done = 0; done < size && !error;) {
    const ssize_t n = ::write(out.fd, p + done, size - done);
    if (n > 0)
      done += size_t(n);
    else if (n < 0 && errno != EINTR)
      error = errno;
    else if (n == 0)
      error = EIO;
  }
  if (!error && !to_stdout && ::close(std::exchange(out.fd, -1)) != 0) error = errno;
  if (!error) return;
  struct stat st {};
  if (!to_stdout && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(path.c_str());
  throw Failure(PCACHE_ERR_IO, io_failure("write", name, error));
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double seconds_since(int64_t start_ns) {
  return double(now_ns() - start_ns) / 1e9;
}

Progress::Progress(std::string what, uint64_t total)
    : what_(std::move(what)), total_(total), on_terminal_(::isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  finish();
}

void Progress::finish() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");  // the result line replaces the progress line
  drawn_ = false;
  std::fflush(stderr);
}

void Progress::update(uint64_t done, const std::string &detail) {
  if (!on_terminal_) return;
  const int64_t now = now_ns();
  if (drawn_ && now - last_draw_ns_ < 100'000'000) return;
  last_draw_ns_ = now;
  drawn_ = true;
  if (total_)
    std::fprintf(stderr, "\r\033[Kprogcache: %s: %llu/%llu (%.0f%%)%s", what_.c_str(),
                 (unsigned long long)done, (unsigned long long)total_,
                 100.0 * double(done) / double(total_), detail.c_str());
  else
    std::fprintf(stderr, "\r\033[Kprogcache: %s: %llu%s", what_.c_str(), (unsigned long long)done,
                 detail.c_str());
  std::fflush(stderr);
}

}  // namespace progcache::cli
