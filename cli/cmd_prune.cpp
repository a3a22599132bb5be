// progcache prune --max-size SIZE: evict least-recently-used entries down to SIZE.
#include <cstdio>
#include <string>

#include "commands.hpp"

namespace progcache::cli {

int cmd_prune(Invocation &in) {
  const int64_t t0 = now_ns();
  uint64_t cap = in.cap;
  {
    // Opened without a cap first: a store that is not pruned here must not be touched.
    const CacheHandle uncapped = open_cache(in.uri, 0);
    const pcache_admin_info info = cache_info(uncapped.get());
    const std::string scheme = info.scheme;
    if (scheme == "redis" || scheme == "tiered")
      throw Usage("prune: a " + scheme +
                  ": cache is not pruned by progcache (Redis evicts by its maxmemory policy; "
                  "prune each local tier by its own URI)");
    if (!in.cap_given) cap = info.configured_max_size;
    if (!cap) throw Usage("prune needs --max-size SIZE (no cap is configured: progcache config)");
  }
  const CacheHandle capped = open_cache(in.uri, cap);  // opening with the cap evicts down to it
  pcache_stats stats{};
  check(pcache_stats_init(&stats, sizeof stats));
  check(pcache_get_stats(capped.get(), &stats));
  uint64_t bytes = 0;
  check(pcache_size(capped.get(), &bytes));
  std::printf("pruned to %s (cap %s): %llu entries left, %llu evicted, %.2f s\n",
              human_size(bytes).c_str(), human_size(cap).c_str(),
              (unsigned long long)entry_count(capped.get()), (unsigned long long)stats.evictions,
              seconds_since(t0));
  return 0;
}

}  // namespace progcache::cli
