// The backends the contract suite runs on. A new backend joins by adding one line to kBackends.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "test_util.hpp"

struct BackendCase {
  const char *name;
  std::string (*uri)(const testutil::TempDir &dir);
  bool persistent;
};

// Test names and failure messages show the backend's name, not the struct's bytes.
inline void PrintTo(const BackendCase &b, std::ostream *os) {
  *os << b.name;
}

inline const BackendCase kBackends[] = {
    {"memory", [](const testutil::TempDir &) { return std::string("memory:"); }, false},
    {"sqlite", [](const testutil::TempDir &d) { return "sqlite:" + (d / "cache.db"); }, true},
    {"filestream",
     [](const testutil::TempDir &d) { return "filestream:" + (d / "fs") + "?touch_interval_ms=0"; },
     true},
};

inline std::vector<BackendCase> persistent_backends() {
  std::vector<BackendCase> out;
  for (const BackendCase &b : kBackends)
    if (b.persistent) out.push_back(b);
  return out;
}
