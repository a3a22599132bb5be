// Helpers shared by the benchmark programs.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace benchutil {

// PCACHE_BENCH_SMOKE=1: shrink the set-up (CI runs one iteration of each benchmark).
inline bool smoke() {
  const char *s = std::getenv("PCACHE_BENCH_SMOKE");
  return s && *s == '1';
}

// One scratch directory per process under $TMPDIR, made on first use.
inline std::string temp_dir() {
  static const std::string dir = [] {
    const char *base = std::getenv("TMPDIR");
    std::string t = std::string(base && *base ? base : "/tmp") + "/pcache-bench-XXXXXX";
    if (!::mkdtemp(t.data())) std::abort();
    return t;
  }();
  return dir;
}

}  // namespace benchutil
