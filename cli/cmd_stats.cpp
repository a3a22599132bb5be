// progcache stats: entries, size, cap and the counters every process shares (per tier for a
// tiered cache); --zero resets the counters, --json prints one JSON object.
#include <cstdio>
#include <string>

#include "commands.hpp"

namespace progcache::cli {
namespace {

struct Totals {
  uint64_t entries = 0, bytes = 0;
  pcache_shared_stats shared{};
};

Totals totals(pcache *cache) {
  Totals t;
  t.entries = entry_count(cache);
  check(pcache_size(cache, &t.bytes));
  t.shared.struct_size = sizeof t.shared;
  check(pcache_get_shared_stats(cache, &t.shared));
  return t;
}

std::string json_number_or_null(uint64_t v) {
  return v ? std::to_string(v) : "null";
}

// Each tier's own storage and shared counters, as text or as a JSON "tiers" array.
int print_tiers(pcache *cache, const pcache_admin_info &info, bool json) {
  std::string out = "{\"cache\": " + json_string(info.uri) + ", \"tiers\": [";
  if (!json) std::printf("cache:               %s\n", info.uri);
  for (uint32_t i = 0; i < info.tier_count; ++i) {
    pcache *tier = nullptr;
    check(pcache_admin_tier(cache, i, &tier));
    const std::string uri = cache_info(tier).uri;
    out += (i ? ", " : "") + std::string("{\"uri\": ") + json_string(uri);
    if (!json) std::printf("tier %u:              %s\n", i, uri.c_str());
    try {
      const Totals t = totals(tier);
      out += ", \"entries\": " + std::to_string(t.entries) +
             ", \"size_bytes\": " + std::to_string(t.bytes) +
             ", \"hits\": " + std::to_string(t.shared.hits) +
             ", \"misses\": " + std::to_string(t.shared.misses) + "}";
      if (!json)
        std::printf("  entries %llu, size %s, hits %lld, misses %lld\n",
                    (unsigned long long)t.entries, human_size(t.bytes).c_str(),
                    (long long)t.shared.hits, (long long)t.shared.misses);
    } catch (const Failure &e) {  // one tier down: say so and show the others
      out += ", \"error\": " + json_string(e.what()) + "}";
      if (!json) std::printf("  unavailable: %s\n", e.what());
    }
  }
  if (json) std::printf("%s]}\n", out.c_str());
  return 0;
}

// The cap stats reports: --max-size when given, else the configured one, and where it is from.
struct Cap {
  uint64_t bytes;
  std::string source;
};

// Seconds with one decimal, or milliseconds below a second (47,646 us is "47.6 ms", not "0.0 s").
std::string duration_text(int64_t us) {
  char buf[32];
  if (us < 1000000)
    std::snprintf(buf, sizeof buf, "%.1f ms", double(us) / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%.1f s", double(us) / 1e6);
  return buf;
}

int print_json(const pcache_admin_info &info, const Totals &t, const Cap &cap_in) {
  const uint64_t cap = cap_in.bytes;
  const int64_t lookups = t.shared.hits + t.shared.misses;
  char ratios[160];
  std::snprintf(ratios, sizeof ratios, "\"fill_ratio\": %s, \"hit_rate\": %.4f",
                cap ? std::to_string(double(t.bytes) / double(cap)).c_str() : "null",
                lookups ? double(t.shared.hits) / double(lookups) : 0.0);
  std::printf(
      "{\"cache\": %s, \"entries\": %llu, \"size_bytes\": %llu, \"cap_bytes\": %s, "
      "\"cap_source\": %s, %s, \"hits\": %lld, \"misses\": %lld, \"evictions\": %lld, "
      "\"compile_us_saved\": %lld, \"corrupt\": %lld, \"uncacheable\": %lld, "
      "\"tier_errors\": %lld, \"tier_timeouts\": %lld, \"healed\": %lld}\n",
      json_string(info.uri).c_str(), (unsigned long long)t.entries, (unsigned long long)t.bytes,
      json_number_or_null(cap).c_str(),
      cap_in.source.empty() ? "null" : json_string(cap_in.source).c_str(), ratios,
      (long long)t.shared.hits, (long long)t.shared.misses, (long long)t.shared.evictions,
      (long long)t.shared.compile_us_saved, (long long)t.shared.corrupt,
      (long long)t.shared.uncacheable, (long long)t.shared.tier_errors,
      (long long)t.shared.tier_timeouts, (long long)t.shared.healed);
  return 0;
}

int print_text(const pcache_admin_info &info, const Totals &t, const Cap &cap_in) {
  const uint64_t cap = cap_in.bytes;
  std::printf("cache:               %s\n", info.uri);
  std::printf("entries:             %llu\n", (unsigned long long)t.entries);
  std::printf("size:                %s\n", human_size(t.bytes).c_str());
  if (cap)
    std::printf("cap:                 %s (%.1f%% full), from %s\n", human_size(cap).c_str(),
                100.0 * double(t.bytes) / double(cap), cap_in.source.c_str());
  else
    std::printf("cap:                 none (progcache config max_size SIZE sets one)\n");
  std::printf("hits:                %lld\n", (long long)t.shared.hits);
  std::printf("misses:              %lld\n", (long long)t.shared.misses);
  const int64_t lookups = t.shared.hits + t.shared.misses;
  std::printf("hit rate:            %.1f%%\n",
              lookups ? 100.0 * double(t.shared.hits) / double(lookups) : 0.0);
  std::printf("evictions:           %lld\n", (long long)t.shared.evictions);
  std::printf("compile time saved:  %s\n", duration_text(t.shared.compile_us_saved).c_str());
  std::printf("damaged, removed:    %lld\n", (long long)t.shared.corrupt);
  std::printf("not stored:          %lld (uncacheable programs, failed stores)\n",
              (long long)t.shared.uncacheable);
  if (t.shared.healed)
    std::printf("healed:              %lld (images the driver rejected, compiled again)\n",
                (long long)t.shared.healed);
  if (t.shared.tier_errors)
    std::printf("tier errors:         %lld (a tier of a tiered cache failed; %lld timed out)\n",
                (long long)t.shared.tier_errors, (long long)t.shared.tier_timeouts);
  return 0;
}

}  // namespace

int cmd_stats(Invocation &in) {
  if (in.has("zero") && in.has("json")) throw Usage("stats takes --zero or --json, not both");
  const pcache_admin_info info = cache_info(in.cache);
  if (in.has("zero")) {
    if (info.tier_count) {
      for (uint32_t i = 0; i < info.tier_count; ++i) {
        pcache *tier = nullptr;
        check(pcache_admin_tier(in.cache, i, &tier));
        check(pcache_admin_zero_shared_stats(tier));
      }
    } else {
      check(pcache_admin_zero_shared_stats(in.cache));
    }
    std::printf("statistics zeroed (%llu entries kept)\n",
                (unsigned long long)entry_count(in.cache));
    return 0;
  }
  if (info.tier_count) return print_tiers(in.cache, info, in.has("json"));
  const Totals t = totals(in.cache);
  const Cap cap = in.cap_given ? Cap{in.cap, "--max-size"}
                               : Cap{info.configured_max_size, info.max_size_source};
  return in.has("json") ? print_json(info, t, cap) : print_text(info, t, cap);
}

}  // namespace progcache::cli
