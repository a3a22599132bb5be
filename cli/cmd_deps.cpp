// progcache deps FILE.cu: the header paths the key covers, found or absent.
#include <cstdio>

#include "commands.hpp"
#include "explain.hpp"

namespace progcache::cli {

int cmd_deps(Invocation &in) {
  const Program program(in);
  const ExplainHandle e = explain_program(in.cache, program);
  size_t n = 0;
  const char *const *paths = nullptr;
  const int32_t *present = nullptr;
  check(pcache_explain_dependencies(e.get(), &n, &paths, &present));
  for (size_t i = 0; i < n; ++i)
    std::printf("%s %s\n", present[i] ? "present" : "absent ", paths[i]);
  const std::string uncacheable = pcache_explain_uncacheable(e.get());
  if (uncacheable.empty()) return 0;
  std::printf("uncacheable: %s\n", uncacheable.c_str());
  return 1;
}

}  // namespace progcache::cli
