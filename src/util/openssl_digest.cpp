#include "util/openssl_digest.hpp"

#include <openssl/core_dispatch.h>
#include <openssl/provider.h>
#include <strings.h>

#include <cstring>
#include <string_view>

#include "util/libcrypto.hpp"

namespace progcache {

namespace {

// Whether NAMES, an algorithm's colon-separated names, holds NAME (OpenSSL's names ignore case).
bool names_hold(const char *names, std::string_view name) {
  for (std::string_view rest(names); !rest.empty();) {
    const size_t end = rest.find(':');
    const std::string_view one = rest.substr(0, end);
    if (one.size() == name.size() && ::strncasecmp(one.data(), name.data(), name.size()) == 0)
      return true;
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return false;
}

bool process_may_refuse_digests() {
  const LibCrypto &crypto = libcrypto();
  return crypto.EVP_default_properties_is_fips_enabled(nullptr) == 1 ||
         crypto.OSSL_PROVIDER_available(nullptr, "fips") == 1;
}

std::optional<DigestOps> from_dispatch(const OSSL_DISPATCH *table, void *provctx) {
  DigestOps ops;
  ops.provctx = provctx;
  for (const OSSL_DISPATCH *f = table; f && f->function_id != 0; ++f) {
    switch (f->function_id) {
      case OSSL_FUNC_DIGEST_NEWCTX:
        ops.newctx = OSSL_FUNC_digest_newctx(f);
        break;
      case OSSL_FUNC_DIGEST_FREECTX:
        ops.freectx = OSSL_FUNC_digest_freectx(f);
        break;
      case OSSL_FUNC_DIGEST_INIT:
        ops.init = OSSL_FUNC_digest_init(f);
        break;
      case OSSL_FUNC_DIGEST_UPDATE:
        ops.update = OSSL_FUNC_digest_update(f);
        break;
      case OSSL_FUNC_DIGEST_FINAL:
        ops.final = OSSL_FUNC_digest_final(f);
        break;
      default:
        break;
    }
  }
  if (!ops.newctx || !ops.freectx || !ops.init || !ops.update || !ops.final) return std::nullopt;
  return ops;
}

// EVP behind the provider shape: the context is bound to its digest when made, so that init can
// restart it without naming the digest again (EVP_DigestInit_ex2 with no type).
void *evp_newctx(void *md) {
  const LibCrypto &crypto = libcrypto();
  EVP_MD_CTX *ctx = crypto.EVP_MD_CTX_new();
  if (ctx && crypto.EVP_DigestInit_ex2(ctx, static_cast<const EVP_MD *>(md), nullptr) != 1) {
    crypto.EVP_MD_CTX_free(ctx);
    return nullptr;
  }
  return ctx;
}
void evp_freectx(void *ctx) {
  libcrypto().EVP_MD_CTX_free(static_cast<EVP_MD_CTX *>(ctx));
}
int evp_init(void *ctx, const OSSL_PARAM[]) {
  return libcrypto().EVP_DigestInit_ex2(static_cast<EVP_MD_CTX *>(ctx), nullptr, nullptr);
}
int evp_update(void *ctx, const unsigned char *in, size_t size) {
  return libcrypto().EVP_DigestUpdate(static_cast<EVP_MD_CTX *>(ctx), in, size);
}
int evp_final(void *ctx, unsigned char *out, size_t *out_size, size_t capacity) {
  if (capacity < EVP_MAX_MD_SIZE) return 0;
  unsigned int n = 0;
  const int ok = libcrypto().EVP_DigestFinal_ex(static_cast<EVP_MD_CTX *>(ctx), out, &n);
  *out_size = n;
  return ok;
}

}  // namespace

std::optional<DigestOps> default_provider_digest(const char *name) {
  if (process_may_refuse_digests()) return std::nullopt;
  const LibCrypto &crypto = libcrypto();
  OSSL_LIB_CTX *own = crypto.OSSL_LIB_CTX_new();
  OSSL_PROVIDER *provider = own ? crypto.OSSL_PROVIDER_load(own, "default") : nullptr;
  int no_cache = 0;
  const OSSL_ALGORITHM *algorithms =
      provider ? crypto.OSSL_PROVIDER_query_operation(provider, OSSL_OP_DIGEST, &no_cache)
               : nullptr;
  for (const OSSL_ALGORITHM *a = algorithms; a && a->algorithm_names; ++a)
    if (names_hold(a->algorithm_names, name))
      if (auto ops =
              from_dispatch(a->implementation, crypto.OSSL_PROVIDER_get0_provider_ctx(provider)))
        return ops;  // the context and its provider stay loaded for the process
  if (own) crypto.OSSL_LIB_CTX_free(own);  // unloads the provider with it
  return std::nullopt;
}

DigestOps evp_digest_ops(const EVP_MD *md) {
  DigestOps ops;
  ops.newctx = evp_newctx;
  ops.freectx = evp_freectx;
  ops.init = evp_init;
  ops.update = evp_update;
  ops.final = evp_final;
  ops.provctx = const_cast<EVP_MD *>(md);  // handed back to evp_newctx only
  return ops;
}

}  // namespace progcache
