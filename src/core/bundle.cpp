#include "core/bundle.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <set>

#include "backends/sqlite_backend.hpp"
#include "core/compiled_meta.hpp"
#include "core/observation.hpp"
#include "format/entry.hpp"
#include "util/endian.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"
#include "util/paths.hpp"
#include "util/uri.hpp"

namespace progcache {
namespace {

constexpr char kMagic[8] = {'P', 'C', 'B', 'U', 'N', 'D', 'L', 'E'};
// 2: the observations of NVRTC entries are found by travel along, as records under
// kMemoKeyPrefix (format 1 bundles are still read).
constexpr uint32_t kVersion = 2;
// A record whose key starts so is a memo (a manifest of observations), not an entry.
constexpr std::string_view kMemoKeyPrefix{"\0progcache-memo\0", 16};
constexpr int kCompressLevel = 3;
// Beyond any record a backend accepts (payloads up to 4 GiB plus key and metadata): a length
// over it means the framing is broken, not that a huge allocation is wanted.
constexpr uint64_t kMaxRecord = (4ull << 30) + (1ull << 20);

using File = std::unique_ptr<FILE, int (*)(FILE *)>;

void put_u64(uint8_t *p, uint64_t v) {
  store_le(p, v, 8);
}
uint64_t get_u64(const uint8_t *p) {
  return load_le(p, 8);
}

class Ticker {
 public:
  explicit Ticker(const std::function<void(const BundleProgress &)> &fn) : fn_(fn) {}
  void maybe(const BundleProgress &p) {
    const auto now = std::chrono::steady_clock::now();
    if (fn_ && now - last_ >= std::chrono::seconds(1)) {
      last_ = now;
      fn_(p);
    }
  }

 private:
  const std::function<void(const BundleProgress &)> &fn_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

void write_all(FILE *f, const void *data, size_t n, const std::string &path) {
  if (n && std::fwrite(data, 1, n, f) != n) throw_errno("cannot write " + path);
}

// false at a clean end of file before the first byte; throws on a partial read.
bool read_exact(FILE *f, void *data, size_t n, const std::string &path) {
  const size_t got = std::fread(data, 1, n, f);
  if (got == n) return true;
  if (std::ferror(f)) throw_errno("cannot read " + path);
  if (got == 0) return false;
  throw Error(Status::corrupt, path + ": bundle ends in the middle of a record (truncated)");
}

}  // namespace

namespace {

// path made absolute (from the working directory), its parent directory resolved: what a
// write to it would replace, whether or not it exists yet.
std::string resolved(const std::string &path) {
  char parent[PATH_MAX];
  if (!::realpath(parent_dir(path).c_str(), parent)) return path;
  return join_path(parent, base_name(path));
}

bool inside(const std::string &path, const std::string &dir) {
  char real[PATH_MAX];
  const std::string d = ::realpath(dir.c_str(), real) ? std::string(real) : resolved(dir);
  return path == d || path.rfind(d + "/", 0) == 0;
}

// True when path is a file the cache at uri_text owns or will own: its database, WAL, shared
// memory, journal, lock directory and what is in it, or anything inside a file-stream
// directory. Writing a bundle there would destroy the cache or its single flight (a file named
// DB.locks where the lock directory goes makes every compile skip the cross-process lock).
bool is_part_of(const std::string &uri_text, const std::string &path) {
  const Uri uri = parse_uri(uri_text.empty() ? default_uri() : uri_text);
  if (uri.scheme == "tiered") {
    std::string rest = uri.path;
    for (size_t bar; !rest.empty(); rest = bar == std::string::npos ? "" : rest.substr(bar + 1)) {
      bar = rest.find('|');
      if (is_part_of(rest.substr(0, bar), path)) return true;
    }
    return false;
  }
  const std::string target = resolved(path);
  if (uri.scheme == "sqlite") {
    const std::string db = resolved(uri.path);
    for (const char *suffix : SqliteBackend::kFileSuffixes)
      if (target == db + suffix) return true;
    return inside(target, db + ".locks");
  }
  return uri.scheme == "filestream" && inside(target, uri.path);
}

}  // namespace

BundleProgress export_bundle(Cache &cache, const std::string &path,
                             const std::function<void(const BundleProgress &)> &progress) {
  const bool to_stdout = path == "-";
  if (!to_stdout && is_part_of(cache.uri(), path))
    throw Error(Status::invalid_arg,
                "'" + path + "' is a file of the cache being exported; write the bundle elsewhere");
  // A regular file (or none yet) is written whole or not at all: a temp file beside it, renamed
  // over it (over a symlink's target, so the link stays). Anything else is written in place: a
  // rename over a device or a FIFO replaces it (as root, `export /dev/null` put a regular file
  // where the device was).
  struct stat st;
  const bool in_place = to_stdout || (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode));
  std::string target = path;
  if (char real[PATH_MAX]; !in_place && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode) &&
                           ::realpath(path.c_str(), real))
    target = real;
  const std::string tmp = in_place ? "" : target + ".tmp." + std::to_string(::getpid());
  // Created 0600, like the cache: a bundle holds every entry.
  const int fd = to_stdout  ? -1
                 : in_place ? ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC)
                            : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  File f(to_stdout ? stdout : (fd >= 0 ? ::fdopen(fd, "wb") : nullptr),
         to_stdout ? [](FILE *) { return 0; } : std::fclose);
  if (!to_stdout && fd >= 0 && !f) ::close(fd);
  if (!f) throw_errno(in_place ? "cannot open " + path : "cannot create " + tmp);
  BundleProgress p;
  Ticker ticker(progress);
  try {
    uint8_t header[16] = {};
    std::memcpy(header, kMagic, 8);
    header[8] = uint8_t(kVersion);
    write_all(f.get(), header, sizeof header, path);
    p.file_bytes = sizeof header;
    uint64_t records = 0;
    auto write_record = [&](const Blob &record) {
      uint8_t len[8];
      put_u64(len, record.size());
      write_all(f.get(), len, 8, path);
      write_all(f.get(), record.data(), record.size(), path);
      p.file_bytes += 8 + record.size();
      ++records;
    };
    std::set<std::string> identities;
    cache.list([&](const EntryInfo &e) {
      auto hit = cache.get(e.key, Access::peek);  // verified; not counted as a use
      if (!hit) return;                           // evicted or removed since it was listed
      write_record(encode_entry(e.key, hit->meta, hit->payload, cache.mac(), kCompressLevel));
      if (auto meta = decode_meta(hit->meta); meta && meta->identity.size() == kKeySize)
        identities.insert(meta->identity);
      ++p.entries;
      p.bytes += hit->payload.size;
      ticker.maybe(p);
    });
    // Without its observations an entry of a compile is never found (core/observation.hpp).
    for (const std::string &identity : identities) {
      Key k;
      std::memcpy(k.data(), identity.data(), k.size());
      const std::string name = manifest_name(k);
      if (const auto memo = cache.load_memo(name))
        write_record(encode_entry(std::string(kMemoKeyPrefix) + name, {}, *memo, cache.mac(),
                                  kCompressLevel));
    }
    uint8_t end[16];
    put_u64(end, 0);
    put_u64(end + 8, records);
    write_all(f.get(), end, sizeof end, path);
    p.file_bytes += sizeof end;
    if (std::fflush(f.get()) != 0) throw_errno("cannot write " + path);
    if (!in_place) {
      if (::fsync(fileno(f.get())) != 0) throw_errno("cannot sync " + tmp);
      FILE *raw = f.release();
      if (std::fclose(raw) != 0) throw_errno("cannot write " + tmp);
      if (std::rename(tmp.c_str(), target.c_str()) != 0) throw_errno("cannot rename to " + path);
    } else if (!to_stdout) {
      if (std::fclose(f.release()) != 0) throw_errno("cannot write " + path);
    }
  } catch (...) {
    if (!in_place) std::remove(tmp.c_str());
    throw;
  }
  return p;
}

namespace {

// Reads a record of len bytes. A damaged length must not make us allocate gigabytes up front:
// beyond kChunk the record is read in chunks, so memory grows only with bytes that arrive.
Blob read_record(FILE *f, uint64_t len, const std::string &path) {
  constexpr uint64_t kChunk = 16ull << 20;
  auto truncated = [&] {
    return Error(Status::corrupt, path + ": bundle ends in the middle of a record (truncated)");
  };
  if (len <= kChunk) {
    Blob record(len);
    if (!read_exact(f, record.data(), len, path)) throw truncated();
    return record;
  }
  std::string bytes;
  while (bytes.size() < len) {
    const size_t old = bytes.size(), n = size_t(std::min<uint64_t>(kChunk, len - old));
    bytes.resize(old + n);
    if (!read_exact(f, bytes.data() + old, n, path)) throw truncated();
  }
  return Blob::copy_of(bytes);
}

// The largest payload an import will inflate: the cache's cap, the backend's limit, and never
// more than 2 GiB (a bundle is a file anyone may hand us).
uint64_t import_limit(Cache &cache) {
  uint64_t limit = std::min<uint64_t>(cache.max_payload_size(), uint64_t(2) << 30);
  if (cache.max_size_bytes()) limit = std::min(limit, cache.max_size_bytes());
  return limit;
}

// Reads the records after the header up to the end marker, storing the good ones.
void read_records(Cache &cache, FILE *f, const std::string &path, BundleProgress &p, Ticker &ticker,
                  const std::function<void(const std::string &)> &reject) {
  uint64_t index = 0;
  while (true) {
    uint8_t len_bytes[8];
    if (!read_exact(f, len_bytes, 8, path))
      throw Error(Status::corrupt, path + ": bundle ends without its end marker (truncated)");
    const uint64_t len = get_u64(len_bytes);
    if (len == 0) {
      uint8_t count[8];
      if (!read_exact(f, count, 8, path))
        throw Error(Status::corrupt, path + ": bundle ends inside its end marker (truncated)");
      if (get_u64(count) != index)
        throw Error(Status::corrupt, path + ": end marker counts " +
                                         std::to_string(get_u64(count)) + " records, found " +
                                         std::to_string(index));
      p.file_bytes += 16;
      return;
    }
    if (len < kEntryHeaderSize || len > kMaxRecord)
      throw Error(Status::corrupt, path + ": record " + std::to_string(index) + " has length " +
                                       std::to_string(len) + " (framing is damaged)");
    Blob record = read_record(f, len, path);
    p.file_bytes += 8 + len;
    ++index;
    std::string why;
    auto parts = parse_entry(record.view(), &why);
    if (parts) parts = decode_entry(record.view(), parts->key, true, &why, cache.mac());
    // A record may declare a size it would inflate to (a zstd bomb): refuse what this cache
    // could never store before allocating for it.
    if (parts && parts->payload_size > import_limit(cache)) {
      why = "it declares " + std::to_string(parts->payload_size) +
            " bytes of payload, more than this cache can store (" +
            std::to_string(import_limit(cache)) + ")";
      parts.reset();
    }
    std::optional<Blob> plain;
    if (parts && parts->compressed) {
      plain = inflate_entry(*parts, &why);
      parts = plain ? parse_entry(plain->view(), &why) : std::nullopt;
    }
    if (!parts) {
      ++p.rejected;
      if (reject) reject("record " + std::to_string(index - 1) + ": " + why);
      continue;
    }
    const std::string_view key = parts->key.str();
    if (key.substr(0, kMemoKeyPrefix.size()) == kMemoKeyPrefix) {
      if (!merge_manifest(&cache, key.substr(kMemoKeyPrefix.size()), parts->payload.str())) {
        ++p.rejected;
        if (reject) reject("record " + std::to_string(index - 1) + ": not a manifest it knows");
      }
      continue;
    }
    cache.put(parts->key, parts->payload, parts->meta);
    ++p.entries;
    p.bytes += parts->payload.size;
    ticker.maybe(p);
  }
}

}  // namespace

BundleProgress import_bundle(Cache &cache, const std::string &path,
                             const std::function<void(const BundleProgress &)> &progress,
                             const std::function<void(const std::string &)> &reject) {
  const bool from_stdin = path == "-";
  if (!from_stdin && is_part_of(cache.uri(), path))
    throw Error(Status::invalid_arg,
                "'" + path + "' is a file of the cache being imported into, not a bundle");
  File f(from_stdin ? stdin : std::fopen(path.c_str(), "rb"),
         from_stdin ? [](FILE *) { return 0; } : std::fclose);
  if (!f) throw_errno("cannot open " + path);
  return import_bundle_stream(cache, f.get(), path, progress, reject);
}

BundleProgress import_bundle_stream(Cache &cache, FILE *in, const std::string &name,
                                    const std::function<void(const BundleProgress &)> &progress,
                                    const std::function<void(const std::string &)> &reject) {
  uint8_t header[16];
  if (!read_exact(in, header, sizeof header, name) || std::memcmp(header, kMagic, 8) != 0)
    throw Error(Status::corrupt, name + " is not a progcache bundle (bad magic)");
  const uint32_t version = uint32_t(header[8]) | uint32_t(header[9]) << 8 |
                           uint32_t(header[10]) << 16 | uint32_t(header[11]) << 24;
  if (version != 1 && version != kVersion)
    throw Error(Status::unsupported, name + " is bundle format " + std::to_string(version) +
                                         "; this progcache reads formats 1 and " +
                                         std::to_string(kVersion));
  BundleProgress p;
  p.file_bytes = sizeof header;
  Ticker ticker(progress);
  try {
    read_records(cache, in, name, p, ticker, reject);
  } catch (const Error &e) {
    throw Error(e.status(), std::string(e.what()) + "; the " + std::to_string(p.entries) +
                                " good entries before it were stored");
  }
  return p;
}

}  // namespace progcache
