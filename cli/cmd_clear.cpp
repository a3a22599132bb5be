// progcache clear: remove every entry (the shared counters stay: stats --zero resets them).
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_clear(Invocation &in) {
  const uint64_t n = entry_count(in.cache);
  check(pcache_clear(in.cache));
  std::printf("cleared %llu entries\n", (unsigned long long)n);
  return 0;
}

}  // namespace progcache::cli
