// A message digest's operations, OpenSSL's, at the least start-up cost OpenSSL 3 allows.
#pragma once

#include <openssl/core.h>
#include <openssl/evp.h>

#include <optional>

namespace progcache {

// One digest's operations, in the shape of OpenSSL's provider interface (openssl/core_dispatch.h):
// newctx(provctx) makes a context, init starts (or restarts) a digest in it, update and final as
// their names say, freectx frees it. Each returns 1 on success, 0 on failure (newctx: NULL).
// A context is used by one thread at a time; distinct contexts may be used at once.
struct DigestOps {
  void *(*newctx)(void *provctx) = nullptr;
  void (*freectx)(void *ctx) = nullptr;
  int (*init)(void *ctx, const OSSL_PARAM params[]) = nullptr;
  int (*update)(void *ctx, const unsigned char *in, size_t size) = nullptr;
  int (*final)(void *ctx, unsigned char *out, size_t *out_size, size_t capacity) = nullptr;
  void *provctx = nullptr;
};

// The digest NAME of OpenSSL's default provider, called through the provider's own dispatch
// table in a library context of progcache's, where a fetch in the process's default context
// could find nothing that refuses it: OpenSSL's configuration was not loaded (init_openssl()
// returned false), the default properties do not ask for FIPS, and no FIPS provider is loaded.
// The bytes are those a fetch returns (the same code); what is saved is the fetch's first use of
// a library context, which fills its name map from every legacy algorithm name (3.5M
// instructions, more than the rest of a fresh process's cache hit; docs/performance.md), and the
// host's own context is left as it was. std::nullopt where any condition fails or the provider
// lacks NAME: the caller fetches. Call after init_openssl(), once per process (each call makes a
// library context that is kept for the process). Thread-safe as OpenSSL is.
std::optional<DigestOps> default_provider_digest(const char *name);

// MD's operations through EVP (a fetched digest: a configuration was loaded, a FIPS provider).
// MD must outlive every context made with them.
DigestOps evp_digest_ops(const EVP_MD *md);

}  // namespace progcache
