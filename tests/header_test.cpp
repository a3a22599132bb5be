// The public header compiles alone as C++ and declares C linkage.
#include <progcache/progcache.h>

#include <type_traits>

static_assert(std::is_same_v<pcache_status, int32_t>);
static_assert(std::is_standard_layout_v<pcache_options>);
static_assert(sizeof(pcache_options) == 16);
int header_test_cxx() {
  return PCACHE_ERR_INTERNAL;
}
