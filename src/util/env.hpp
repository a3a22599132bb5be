// Reading the environment: every PCACHE_* variable goes through here.
#pragma once

#include <stdlib.h>  // secure_getenv (glibc, _GNU_SOURCE)

namespace progcache {

// getenv that returns nothing in setuid/setgid processes (secure_getenv): a privileged program
// must not take cache locations, libraries to load or behaviour switches from its caller's
// environment. The header promises that every PCACHE_* variable is ignored there.
inline const char *trusted_env(const char *name) {
  return ::secure_getenv(name);
}

}  // namespace progcache
