// progcache get KEY -o FILE: one entry's bytes (a use: it counts a hit or miss).
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_get(Invocation &in) {
  const std::string key = parse_key(in.args[0]);
  const std::string out = in.value("output");
  if (out.empty()) throw Usage("get needs -o FILE (- for standard output)");
  void *data = nullptr;
  size_t size = 0;
  if (check(pcache_get(in.cache, key.data(), key.size(), &data, &size)) == PCACHE_NOT_FOUND) {
    std::fprintf(stderr, "progcache: get: no entry %s\n", in.args[0].c_str());
    return 1;
  }
  const std::unique_ptr<void, void (*)(void *)> owned(data, pcache_free);
  write_file(out, data, size);
  if (out != "-")  // standard output holds the bytes and nothing else
    std::printf("wrote %zu bytes to %s\n", size, out.c_str());
  return 0;
}

}  // namespace progcache::cli
