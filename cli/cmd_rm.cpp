// progcache rm KEY: remove one entry.
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_rm(Invocation &in) {
  const std::string key = parse_key(in.args[0]);
  if (check(pcache_delete(in.cache, key.data(), key.size())) == PCACHE_NOT_FOUND) {
    std::fprintf(stderr, "progcache: rm: no entry %s\n", in.args[0].c_str());
    return 1;
  }
  std::printf("removed %s\n", in.args[0].c_str());
  return 0;
}

}  // namespace progcache::cli
