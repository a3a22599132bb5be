// pcache_program values as the tests and benchmarks build them: one builder instead of six.
#pragma once

#include <progcache/progcache.h>

#include <cstdlib>
#include <string>

namespace testutil {

// A program of the given fields (pointers are borrowed: they must outlive the result), filled
// through pcache_program_init so that fields added later start zeroed.
inline pcache_program make_program(const char *name, const std::string &source,
                                   const char *const *options, size_t num_options,
                                   const char *const *exprs = nullptr, size_t num_exprs = 0,
                                   int32_t target = PCACHE_TARGET_CUBIN) {
  pcache_program p;
  if (pcache_program_init(&p, sizeof p) != PCACHE_OK) std::abort();
  p.name = name;
  p.source = source.c_str();
  p.options = options;
  p.num_options = num_options;
  p.name_expressions = exprs;
  p.num_name_expressions = num_exprs;
  p.target = target;
  return p;
}

}  // namespace testutil
