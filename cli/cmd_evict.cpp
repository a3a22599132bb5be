// progcache evict --older-than AGE | --nvrtc-version V: remove entries unused for AGE, or
// compiled by one NVRTC version.
#include <cstdio>
#include <ctime>
#include <functional>

#include "commands.hpp"

namespace progcache::cli {
namespace {

// "12.4" -> 12040, as pcache_entry_nvrtc_version() numbers versions.
uint32_t parse_nvrtc_version(const std::string &v) {
  const size_t dot = v.find('.');
  auto number = [](const std::string &s) {
    return !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
  };
  if (dot == std::string::npos || !number(v.substr(0, dot)) || !number(v.substr(dot + 1)))
    throw Usage("--nvrtc-version wants MAJOR.MINOR, e.g. 12.4; got '" + v + "'");
  return uint32_t(std::stoul(v.substr(0, dot)) * 1000 + std::stoul(v.substr(dot + 1)) * 10);
}

}  // namespace

int cmd_evict(Invocation &in) {
  if (in.has("older-than") == in.has("nvrtc-version"))
    throw Usage("evict needs --older-than AGE or --nvrtc-version V (one of them)");
  const int64_t t0 = now_ns();
  std::function<bool(const ListedEntry &)> doomed;
  if (in.has("older-than")) {
    uint64_t age = 0;
    if (pcache_admin_parse_duration(in.value("older-than").c_str(), &age) != PCACHE_OK)
      throw Usage("--older-than: " + library_message());
    const int64_t cutoff = int64_t(std::time(nullptr)) - int64_t(age);
    doomed = [cutoff](const ListedEntry &e) { return e.last_use < cutoff; };
  } else {
    const uint32_t version = parse_nvrtc_version(in.value("nvrtc-version"));
    doomed = [&in, version](const ListedEntry &e) {
      const EntryHandle entry = peek_entry(in.cache, e.key);
      return entry && pcache_entry_is_compiled(entry.get()) &&
             pcache_entry_nvrtc_version(entry.get()) == version;
    };
  }
  size_t removed = 0;
  uint64_t bytes = 0;
  for (const ListedEntry &e : list_entries(in.cache))
    if (doomed(e) && check(pcache_delete(in.cache, e.key.data(), e.key.size())) == PCACHE_OK) {
      ++removed;
      bytes += e.payload_size;
    }
  std::printf("evicted %zu entries (%s) in %.2f s\n", removed, human_size(bytes).c_str(),
              seconds_since(t0));
  return 0;
}

}  // namespace progcache::cli
