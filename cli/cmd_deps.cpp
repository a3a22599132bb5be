// progcache deps FILE.cu: the header paths the key covers, found or absent.
#include <cstdio>
#include <string>

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
  // A program never compiled here is listed from the include scan's prediction: say so, and
  // what it could not follow, on stderr (stdout stays one path a line).
  if (const std::string why_not = pcache_explain_why_not(e.get()); !why_not.empty())
    std::fprintf(stderr, "note: %s\n", why_not.c_str());
  const std::string uncacheable = pcache_explain_uncacheable(e.get());
  if (uncacheable.empty()) return 0;
  std::printf("uncacheable: %s\n", uncacheable.c_str());
  return 1;
}

}  // namespace progcache::cli
