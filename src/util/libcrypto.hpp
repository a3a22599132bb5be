// libcrypto (OpenSSL 3), opened when progcache first hashes or signs: a process that derives no
// key and checks no MAC (`progcache version`, `stats`, `ls`, `run`'s own process, a get by key
// without a secret) never maps it, which cost every fresh process 0.7-0.8 ms here whether it
// hashed or not (docs/performance.md). BLAKE2b, SHA-256 and the MAC are OpenSSL's as before;
// its headers give the types and the SONAME the build compiled against.
#pragma once

#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "util/system_library.hpp"

// Every libcrypto function progcache calls. OPENSSL_free and sk_*_num are macros or inline
// functions over CRYPTO_free and OPENSSL_sk_num.
#define PCACHE_LIBCRYPTO_FUNCTIONS(X) \
  X(OPENSSL_init_crypto)              \
  X(OpenSSL_version_num)              \
  X(CRYPTO_free)                      \
  X(CRYPTO_memcmp)                    \
  X(CONF_get1_default_config_file)    \
  X(NCONF_new)                        \
  X(NCONF_load)                       \
  X(NCONF_get_string)                 \
  X(NCONF_get_section)                \
  X(NCONF_free)                       \
  X(OPENSSL_sk_num)                   \
  X(ERR_set_mark)                     \
  X(ERR_pop_to_mark)                  \
  X(EVP_MD_fetch)                     \
  X(EVP_MD_free)                      \
  X(EVP_MD_CTX_new)                   \
  X(EVP_MD_CTX_free)                  \
  X(EVP_DigestInit_ex2)               \
  X(EVP_DigestUpdate)                 \
  X(EVP_DigestFinal_ex)               \
  X(EVP_Digest)                       \
  X(EVP_MAC_fetch)                    \
  X(EVP_MAC_CTX_new)                  \
  X(EVP_MAC_CTX_free)                 \
  X(EVP_MAC_init)                     \
  X(EVP_MAC_update)                   \
  X(EVP_MAC_final)                    \
  X(OSSL_PARAM_construct_size_t)      \
  X(OSSL_PARAM_construct_utf8_string) \
  X(OSSL_PARAM_construct_end)         \
  X(OSSL_LIB_CTX_new)                 \
  X(OSSL_LIB_CTX_free)                \
  X(OSSL_PROVIDER_load)               \
  X(OSSL_PROVIDER_available)          \
  X(OSSL_PROVIDER_query_operation)    \
  X(OSSL_PROVIDER_get0_provider_ctx)  \
  X(EVP_default_properties_is_fips_enabled)

namespace progcache {

PCACHE_SYSTEM_LIBRARY_STRUCT(LibCrypto, PCACHE_LIBCRYPTO_FUNCTIONS)

// libcrypto's functions, the library opened (by PCACHE_LIBCRYPTO_SONAME) and resolved on the
// first call and kept for the process; a host that linked libcrypto already shares its copy.
// Throws Error(Status::unsupported) naming the library and what dlopen or dlsym said.
// Thread-safe.
const LibCrypto &libcrypto();

// Whether libcrypto is mapped in this process already (progcache loaded it, or the host did), so
// that a digest costs only its hashing; a fresh process's first one loads it (~0.6 ms). Loads
// nothing. Thread-safe; a walk of the loaded objects (library_mapped) until the answer is yes,
// then an atomic load.
bool libcrypto_in_process();

}  // namespace progcache
