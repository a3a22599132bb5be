#include "core/cpu_features.h"

#if defined(__x86_64__) && defined(__has_include)
#if __has_include(<sys/platform/x86.h>)
#include <sys/platform/x86.h>
#define HAVE_GLIBC_CPU_FEATURES 1
#endif
#endif

int progcache_glibc_vector_level(void) {
#ifdef HAVE_GLIBC_CPU_FEATURES
  if (CPU_FEATURE_ACTIVE(AVX512F) && CPU_FEATURE_ACTIVE(AVX512BW)) return 2;
  return CPU_FEATURE_ACTIVE(AVX2) ? 1 : 0;
#else
  return -1;
#endif
}
