// OpenSSL, initialised once per process at the least cost it allows (docs/performance.md).
#pragma once

namespace progcache {

// Initialises libcrypto before progcache's first digest or MAC. OpenSSL's configuration is
// loaded as OpenSSL would load it whenever it can change anything ($OPENSSL_CONF set, or the
// system file's `openssl_conf` section holding anything: a FIPS provider, where BLAKE2b is
// refused and docs/security.md applies, algorithm properties, TLS policy for the host's later
// use). Where it cannot, it is not loaded (OPENSSL_INIT_NO_LOAD_CONFIG): loading cost a fresh
// process a fifth of a cache hit's instructions. Which case holds is remembered across processes
// (util/openssl_config_memo.hpp), so that only the first process parses the file. Nothing else of
// the process's OpenSSL state is changed: legacy algorithm names stay registered for the host.
// Returns whether progcache loaded the configuration (this call or an earlier one). Thread-safe;
// cheap after the first call.
bool init_openssl();

// Whether loading the OpenSSL configuration FILE would change anything. A file changes OpenSSL
// only through the section its `openssl_conf` names (providers such as FIPS, algorithm
// properties, TLS policy), so a file without that section, or with it empty, is loaded for
// nothing. OpenSSL's own parser reads it (.include and variables too); a file that is missing or
// does not parse is left to OpenSSL (true). Leaves the thread's OpenSSL error queue as it was.
bool openssl_config_matters(const char *file);

}  // namespace progcache
