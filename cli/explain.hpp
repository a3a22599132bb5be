// pcache_admin_explain() as an owned object, for deps and explain.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "program.hpp"

namespace progcache::cli {

using KeyFields = std::vector<std::pair<std::string, std::string>>;

struct FreeExplain {
  void operator()(pcache_explain *e) const { pcache_explain_free(e); }
};
using ExplainHandle = std::unique_ptr<pcache_explain, FreeExplain>;

inline ExplainHandle explain_program(pcache *cache, const Program &program) {
  pcache_explain *e = nullptr;
  check(pcache_admin_explain(cache, &program.get(), &e));
  return ExplainHandle(e);
}

// Name/value arrays as pairs.
inline KeyFields to_key_fields(size_t n, const char *const *names, const char *const *values) {
  KeyFields out;
  for (size_t i = 0; i < n; ++i) out.emplace_back(names[i], values[i]);
  return out;
}

}  // namespace progcache::cli
