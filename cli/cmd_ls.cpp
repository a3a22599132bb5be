// progcache ls: key, size, target, NVRTC version, last use and program name of every entry
// (peeked: listing
// counts no use and changes no recency).
#include <cstdio>
#include <ctime>

#include "commands.hpp"

namespace progcache::cli {
namespace {

struct Described {
  std::string target, nvrtc, program;  // "" when not a compiled entry, or damaged
};

Described describe(pcache *cache, const std::string &key) {
  // "nvrtc": stored by the drop-in NVRTC (every output of the compile).
  static const char *const kTargets[] = {"cubin", "ptx", "ltoir", "nvrtc"};
  const EntryHandle entry = peek_entry(cache, key);
  if (!entry || !pcache_entry_is_compiled(entry.get())) return {};
  const int32_t target = pcache_entry_target(entry.get());
  const char *program = pcache_entry_program_name(entry.get());
  return {target >= 0 && target < 4 ? kTargets[target] : "?",
          nvrtc_text(pcache_entry_nvrtc_version(entry.get())), program ? program : ""};
}

std::string json_or_null(const std::string &s) {
  return s.empty() ? "null" : json_string(s);
}

}  // namespace

int cmd_ls(Invocation &in) {
  const bool json = in.has("json");
  size_t n = 0;
  if (json)
    std::printf("{\"entries\": [");
  else
    std::printf("%-66s %10s %-6s %-6s %-19s %s\n", "KEY", "SIZE", "TARGET", "NVRTC", "LAST USE",
                "PROGRAM");
  for (const ListedEntry &e : list_entries(in.cache)) {
    const Described d = describe(in.cache, e.key);
    if (json) {
      std::printf(
          "%s{\"key\": %s, \"size_bytes\": %llu, \"target\": %s, \"nvrtc\": %s, "
          "\"last_use\": %lld, \"program\": %s}",
          n ? ", " : "", json_string(show_key(e.key)).c_str(), (unsigned long long)e.payload_size,
          json_or_null(d.target).c_str(), json_or_null(d.nvrtc).c_str(), (long long)e.last_use,
          json_or_null(d.program).c_str());
    } else {
      char when[32] = "-";
      const time_t t = time_t(e.last_use);
      if (t) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
      std::printf("%-66s %10llu %-6s %-6s %-19s %s\n", show_key(e.key).c_str(),
                  (unsigned long long)e.payload_size, d.target.empty() ? "-" : d.target.c_str(),
                  d.nvrtc.empty() ? "-" : d.nvrtc.c_str(), when,
                  d.program.empty() ? "-" : d.program.c_str());
    }
    ++n;
  }
  if (json)
    std::printf("], \"count\": %zu}\n", n);
  else
    std::printf("%zu entries\n", n);
  return 0;
}

}  // namespace progcache::cli
