#include "core/file_facts.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "core/text_scan.hpp"
#include "util/byte_io.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"

namespace progcache {
namespace {

constexpr uint64_t kMaxHeaderBytes = uint64_t(64) << 20;
constexpr std::string_view kMagic = "PCF2";
constexpr size_t kMaxNames = 100000;

// Process-wide memo: stat identity text -> facts.
ForkSafeMutex g_facts_mutex{ForkSafeMutex::kInner};
std::unordered_map<std::string, FactsPtr> g_facts;

std::string memo_name(const StatIdentity &id) {
  return "facts/" + id.text();
}

FactsPtr remember(const StatIdentity &id, FileFacts &&f, MemoStore *memos, bool persist) {
  auto ptr = std::make_shared<const FileFacts>(std::move(f));
  if (persist && memos) memos->save_memo(memo_name(id), encode_file_facts(*ptr));
  std::lock_guard lock(g_facts_mutex);
  if (g_facts.size() > 100000) g_facts.clear();  // bound a long-lived process's memory
  g_facts[id.text()] = ptr;
  return ptr;
}

std::string read_all(int fd, uint64_t size, bool *ok) {
  std::string data(size, '\0');
  *ok = pread_all(fd, data.data(), size, 0);
  char extra;
  if (*ok && ::pread(fd, &extra, 1, off_t(size)) != 0) *ok = false;  // grew while read
  return data;
}

void write_strings(ByteWriter &w, const std::vector<std::string> &v) {
  w.u32(uint32_t(v.size()));
  for (const std::string &s : v) w.str(s);
}

std::vector<std::string> read_strings(ByteReader &r) {
  std::vector<std::string> v(r.count(4));
  for (std::string &s : v) s = std::string(r.str());
  return v;
}

}  // namespace

FileFacts scanned_facts_of_text(std::string_view text) {
  TextFacts scanned = scan_text(text, true);
  FileFacts f;
  f.directives = std::move(scanned.directives);
  f.lexical = scanned.lexical;
  return f;
}

bool scan_beside_pays(size_t text_size) {
  return text_size >= kScanBesideBytes && more_than_one_cpu();
}

FileFacts facts_of_text(std::string_view text) {
  ContentDigest digest;
  FileFacts f;
  if (scan_beside_pays(text.size())) {
    f = scanned_beside(text, [&] { digest = content_digest(text); });
  } else {
    f = scanned_facts_of_text(text);
    digest = content_digest(text);
  }
  f.digest = digest;
  return f;
}

FactsPtr facts_of_file(const std::string &path, const StatIdentity &seen, MemoStore *memos,
                       StatIdentity *now, std::string *error) {
  *now = seen;
  if (!seen.is_racy()) {
    {
      std::lock_guard lock(g_facts_mutex);
      if (auto it = g_facts.find(seen.text()); it != g_facts.end()) return it->second;
    }
    if (memos)
      if (auto text = memos->load_memo(memo_name(seen)))
        if (auto f = decode_file_facts(*text)) return remember(seen, std::move(*f), memos, false);
  }
  // Read what the descriptor holds; if the file changed since the stat, describe what was read.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd || ::fstat(fd.get(), &st) != 0) {
    *error = "cannot read header '" + path + "': " + std::strerror(errno);
    return nullptr;
  }
  *now = StatIdentity::of(st);
  if (now->size > kMaxHeaderBytes) {
    *error = "header '" + path + "' is larger than 64 MiB";
    return nullptr;
  }
  bool ok = false;
  const std::string data = read_all(fd.get(), now->size, &ok);
  if (!ok) {
    *error = "header '" + path + "' could not be read whole (changing?)";
    return nullptr;
  }
  FileFacts f = facts_of_text(data);
  if (now->is_racy() || !(*now == seen)) return std::make_shared<const FileFacts>(std::move(f));
  return remember(*now, std::move(f), memos, true);
}

std::string encode_file_facts(const FileFacts &f) {
  ByteWriter w;
  w.bytes(kMagic);
  w.bytes(std::string_view(reinterpret_cast<const char *>(f.digest.data()), f.digest.size()));
  w.u8(uint8_t(f.lexical.time_macro | f.lexical.time_piece << 1 | f.lexical.paste << 2 |
               f.lexical.path_macro << 3));
  w.str(f.directives.computed);
  w.u32(uint32_t(f.directives.names.size()));
  for (const Directive &d : f.directives.names) {
    w.u8(uint8_t(d.kind));
    w.u8(d.angle);
    w.str(d.name);
  }
  write_strings(w, f.directives.wrappers);
  write_strings(w, f.directives.macro_calls);
  return w.take();
}

std::optional<FileFacts> decode_file_facts(std::string_view in) {
  ByteReader r(in);
  FileFacts f;
  if (r.bytes(kMagic.size()) != kMagic) return std::nullopt;
  const std::string_view digest = r.bytes(f.digest.size());
  if (r.failed()) return std::nullopt;
  std::memcpy(f.digest.data(), digest.data(), f.digest.size());
  const uint8_t flags = r.u8();
  if (flags > 15) return std::nullopt;
  f.lexical = {bool(flags & 1), bool(flags & 2), bool(flags & 4), bool(flags & 8)};
  f.directives.computed = std::string(r.str());
  const uint32_t n = r.count(6);
  if (n > kMaxNames) return std::nullopt;
  for (uint32_t i = 0; i < n && !r.failed(); ++i) {
    Directive d;
    const uint8_t kind = r.u8(), angle = r.u8();
    d.name = std::string(r.str());
    if (kind > uint8_t(DirectiveKind::embed) || angle > 1) return std::nullopt;
    d.kind = DirectiveKind(kind);
    d.angle = angle == 1;
    f.directives.names.push_back(std::move(d));
  }
  f.directives.wrappers = read_strings(r);
  f.directives.macro_calls = read_strings(r);
  if (!r.done()) return std::nullopt;
  return f;
}

}  // namespace progcache
