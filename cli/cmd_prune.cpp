// progcache prune [--max-size SIZE]: evict least-recently-used entries down to SIZE (or the
// configured cap).
#include <cstdio>
#include <string>

#include "commands.hpp"

namespace progcache::cli {
namespace {

// Entries a handle's open evicted.
uint64_t evictions_of(pcache *cache) {
  pcache_stats stats{};
  check(pcache_stats_init(&stats, sizeof stats));
  check(pcache_get_stats(cache, &stats));
  return stats.evictions;
}

}  // namespace

int cmd_prune(Invocation &in) {
  const int64_t t0 = now_ns();
  uint64_t cap = in.cap, size = 0, entries = 0;
  {
    // Opened without a cap first: a store that is not pruned here must not be touched.
    const CacheHandle uncapped = open_cache(in.uri, 0, true);
    const pcache_admin_info info = cache_info(uncapped.get());
    const std::string scheme = info.scheme;
    if (scheme == "redis" || scheme == "tiered")
      throw Usage("prune: a " + scheme +
                  ": cache is not pruned by progcache (Redis evicts by its maxmemory policy; "
                  "prune each local tier by its own URI)");
    if (in.cap_given && !cap)  // a cap of 0 means none everywhere else: say what would do this
      throw Usage("prune --max-size 0 would keep nothing: progcache clear removes every entry");
    if (!in.cap_given) cap = info.configured_max_size;
    if (!cap) throw Usage("prune needs --max-size SIZE (no cap is configured: progcache config)");
    check(pcache_size(uncapped.get(), &size));
    entries = entry_count(uncapped.get());
  }
  // Opening with a cap evicts down to it, in one go. A large prune steps the cap down in tenths
  // of the way so that a terminal can show how far it got.
  const int steps = size > cap && entries > 1000 ? 10 : 1;
  Progress progress("prune (bytes evicted)", size > cap ? size - cap : 0);
  uint64_t evicted = 0;
  for (int step = 1; step < steps; ++step) {
    const uint64_t step_cap = size - (size - cap) / uint64_t(steps) * uint64_t(step);
    evicted += evictions_of(open_cache(in.uri, step_cap, true).get());
    progress.update(size - step_cap, ", " + std::to_string(evicted) + " entries");
  }
  const CacheHandle capped = open_cache(in.uri, cap, true);
  evicted += evictions_of(capped.get());
  uint64_t bytes = 0;
  check(pcache_size(capped.get(), &bytes));
  progress.finish();
  std::printf("pruned to %s (cap %s): %llu entries left, %llu evicted, %.2f s\n",
              human_size(bytes).c_str(), human_size(cap).c_str(),
              (unsigned long long)entry_count(capped.get()), (unsigned long long)evicted,
              seconds_since(t0));
  return 0;
}

}  // namespace progcache::cli
