// Operation sequences from fuzz bytes on each backend (memory, sqlite, filestream), checked
// against a std::map model: every get returns exactly the model's value or its absence.
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <string>

#include "core/cache.hpp"
#include "scratch.hpp"
#include "util/error.hpp"

using namespace progcache;

namespace {
std::string temp_dir() {
  static const std::string dir = testutil::make_scratch_dir("fuzz");
  return dir;
}
Cache &cache_for(int backend) {
  static std::unique_ptr<Cache> caches[3];
  if (!caches[backend]) {
    const char *uris[] = {"memory:", "sqlite:", "filestream:"};
    std::string uri = uris[backend];
    if (backend == 1) uri += temp_dir() + "/c.db";
    if (backend == 2) uri += temp_dir() + "/fs?touch_interval_ms=0";
    caches[backend] = Cache::open(uri, CacheOptions{});
  }
  return *caches[backend];
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  Cache &cache = cache_for(data[0] % 3);
  cache.clear();
  std::map<std::string, std::string> model;
  size_t i = 1;
  while (i + 2 <= size) {
    const uint8_t op = data[i] % 5;
    const std::string key(1, char('a' + data[i + 1] % 8));
    i += 2;
    switch (op) {
      case 0: {  // put: value length from the next byte, bytes from the input
        const size_t len = i < size ? data[i++] % 64 : 0;
        const size_t take = std::min(len, size - i);
        const std::string value(reinterpret_cast<const char *>(data + i), take);
        i += take;
        cache.put(key, value);
        model[key] = value;
        break;
      }
      case 1: {
        auto hit = cache.get(key);
        auto it = model.find(key);
        if (bool(hit) != (it != model.end())) __builtin_trap();
        if (hit && hit->payload.str() != it->second) __builtin_trap();
        break;
      }
      case 2:
        if (cache.remove(key) != (model.erase(key) == 1)) __builtin_trap();
        break;
      case 3:
        cache.clear();
        model.clear();
        break;
      default:
        if (cache.count() != model.size()) __builtin_trap();
        break;
    }
  }
  return 0;
}
