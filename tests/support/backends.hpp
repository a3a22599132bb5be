// The backends the contract suite runs on. A new backend joins by adding one line to kBackends.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "redis_server.hpp"
#include "test_util.hpp"

struct BackendCase {
  const char *name;
  std::string (*uri)(const testutil::TempDir &dir);
  bool persistent;
  // progcache itself enforces max_size_bytes with exact LRU eviction. Not so for redis, whose
  // cap is the server's maxmemory, nor for a tiered stack, where each tier evicts on its own.
  bool own_cap;
  // The same storage as another case with an option changed: contract suite only.
  bool variant = false;
};

// Test names and failure messages show the backend's name, not the struct's bytes.
inline void PrintTo(const BackendCase &b, std::ostream *os) {
  *os << b.name;
}

// redis and tiered use a server this test process starts on first use (tests/redis_server.hpp).
inline const BackendCase kBackends[] = {
    {"memory", [](const testutil::TempDir &) { return std::string("memory:"); }, false, true},
    // Hits record recency at every use (touch_interval_ms=0): the contract's LRU order is exact.
    {"sqlite",
     [](const testutil::TempDir &d) {
       return "sqlite:" + (d / "cache.db") + "?touch_interval_ms=0";
     },
     true, true},
    {"filestream",
     [](const testutil::TempDir &d) { return "filestream:" + (d / "fs") + "?touch_interval_ms=0"; },
     true, true},
    {"sqlite_zstd",
     [](const testutil::TempDir &d) {
       return "sqlite:" + (d / "cache.db") + "?compress=zstd&touch_interval_ms=0";
     },
     true, true, true},
    {"redis",
     [](const testutil::TempDir &d) {
       return testutil::shared_redis().uri(testutil::redis_prefix(d));
     },
     true, false},
    {"tiered",
     [](const testutil::TempDir &d) {
       return "tiered:memory:|sqlite:" + (d / "tier.db") + "|" +
              testutil::shared_redis().uri(testutil::redis_prefix(d));
     },
     true, false},
};

// The backends that keep entries in local files under a cap progcache enforces (the kill,
// damage, permission and large-value suites).
inline std::vector<BackendCase> persistent_backends() {
  std::vector<BackendCase> out;
  for (const BackendCase &b : kBackends)
    if (b.persistent && b.own_cap && !b.variant) out.push_back(b);
  return out;
}
