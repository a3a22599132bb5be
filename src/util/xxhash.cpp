#include "util/xxhash.hpp"

namespace progcache {

const LibXxhash &libxxhash() {
  static constinit SystemLibrary library(PCACHE_XXHASH_SONAME);
  static constinit LibXxhash api{};
  static constinit ForkSafeOnce resolved;
  resolved.run([] {
    PCACHE_LIBXXHASH_FUNCTIONS(PCACHE_SYSTEM_LIBRARY_RESOLVE)
    api.XXH3_64bits_fast =
        library.optional_function<decltype(&::XXH3_64bits)>("XXH3_64bits_dispatch");
    if (!api.XXH3_64bits_fast) api.XXH3_64bits_fast = api.XXH3_64bits;
    api.XXH3_128bits_withSeed_fast = library.optional_function<decltype(&::XXH3_128bits_withSeed)>(
        "XXH3_128bits_withSeed_dispatch");
    if (!api.XXH3_128bits_withSeed_fast) api.XXH3_128bits_withSeed_fast = api.XXH3_128bits_withSeed;
  });
  return api;
}

}  // namespace progcache
