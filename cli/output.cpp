// Helpers every command uses: calling the library, formatting, files, progress.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

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

std::string read_file(const std::string &path) {
  std::stringstream ss;
  if (path == "-") {
    ss << std::cin.rdbuf();
    if (std::cin.bad()) throw Failure(PCACHE_ERR_IO, "cannot read standard input");
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Failure(PCACHE_ERR_IO, "cannot read '" + path + "': " + std::strerror(errno));
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string &path, const void *data, size_t size) {
  if (path == "-") {
    if (std::fwrite(data, 1, size, stdout) != size || std::fflush(stdout) != 0)
      throw Failure(PCACHE_ERR_IO,
                    std::string("cannot write standard output: ") + std::strerror(errno));
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char *>(data), std::streamsize(size));
  out.close();
  if (!out) throw Failure(PCACHE_ERR_IO, "cannot write '" + path + "': " + std::strerror(errno));
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
