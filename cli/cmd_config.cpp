// progcache config [max_size SIZE|none]: the settings that apply to the cache and where each
// comes from; with a value, store the cache's own size cap.
#include <cstdio>
#include <string>
#include <vector>

#include "commands.hpp"

namespace progcache::cli {
namespace {

struct Row {
  std::string name, value, source;
};

std::vector<Row> settings(pcache *cache) {
  std::vector<Row> rows;
  check(pcache_admin_config_list(
      cache,
      [](const char *name, const char *value, const char *source, void *context) {
        static_cast<std::vector<Row> *>(context)->push_back({name, value, source});
      },
      &rows));
  return rows;
}

std::string padded(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

std::string shown(const Row &r) {
  if (r.source.empty() && r.name != "config_files") return "(unset)";
  if (r.name == "max_size" && !r.value.empty()) {
    const uint64_t bytes = std::stoull(r.value);
    return bytes ? human_size(bytes) + " (" + r.value + " bytes)" : "none (0)";
  }
  return r.value;
}

}  // namespace

int cmd_config(Invocation &in) {
  if (in.args.size() == 1) throw Usage("config takes no operand or NAME VALUE (max_size SIZE)");
  if (in.args.size() == 2) {
    if (in.args[0] != "max_size")
      throw Usage("only max_size is stored in the cache; set '" + in.args[0] +
                  "' in a config file or the environment (progcache config lists them)");
    const std::string value = in.args[1] == "none" ? "" : in.args[1];
    uint64_t bytes = 0;
    if (!value.empty() && pcache_admin_parse_size(value.c_str(), &bytes) != PCACHE_OK)
      throw Usage("max_size: " + library_message());
    check(pcache_admin_config_set(in.cache, "max_size", value.c_str()));
    if (value.empty())
      std::printf("removed the cap stored in %s\n", cache_info(in.cache).uri);
    else
      std::printf("stored max_size %s in %s (applies from the next put of each process)\n",
                  bytes ? human_size(bytes).c_str() : "0 (no cap: the cache grows without bound)",
                  cache_info(in.cache).uri);
  }
  for (const Row &r : settings(in.cache)) {
    const std::string line =
        r.source.empty() ? shown(r) : padded(shown(r), 28) + " from " + r.source;
    std::printf("%-14s %s\n", r.name.c_str(), line.c_str());
  }
  return 0;
}

}  // namespace progcache::cli
