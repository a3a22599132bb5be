// Helpers shared by the benchmark programs.
#pragma once

#include <progcache/progcache.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "programs.hpp"
#include "scratch.hpp"

namespace benchutil {

// PCACHE_BENCH_SMOKE=1: shrink the set-up (CI runs one iteration of each benchmark).
inline bool smoke() {
  const char *s = std::getenv("PCACHE_BENCH_SMOKE");
  return s && *s == '1';
}

// One scratch directory per process under $TMPDIR, made on first use.
inline std::string temp_dir() {
  static const std::string dir = testutil::make_scratch_dir("bench");
  return dir;
}

// examples/kernels.cu as the benchmarks compile it: options[0..1] (arch, standard), both
// name expressions. source and options must outlive the result.
inline pcache_program kernels_program(const std::string &source, const char *const options[2],
                                      int32_t target = PCACHE_TARGET_CUBIN) {
  static const char *exprs[] = {"scale_add<float>", "block_sum<float, 256>"};
  return testutil::make_program("kernels.cu", source, options, 2, exprs, 2, target);
}

}  // namespace benchutil
