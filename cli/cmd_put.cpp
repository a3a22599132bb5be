// progcache put KEY FILE: store FILE's bytes under KEY.
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_put(Invocation &in) {
  const std::string key = parse_key(in.args[0]);
  const std::string data = read_file(in.args[1]);
  check(pcache_put(in.cache, key.data(), key.size(), data.data(), data.size()));
  std::printf("stored %zu bytes under %s\n", data.size(), in.args[0].c_str());
  return 0;
}

}  // namespace progcache::cli
