#include "util/openssl_init.hpp"

#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include <cstdlib>
#include <mutex>

namespace progcache {
namespace {

// A file named by $OPENSSL_CONF is always loaded: the user asked for it.
bool config_matters() {
  if (const char *conf = std::getenv("OPENSSL_CONF"); conf && *conf) return true;
  char *file = CONF_get1_default_config_file();
  const bool matters = openssl_config_matters(file);
  OPENSSL_free(file);
  return matters;
}

}  // namespace

bool openssl_config_matters(const char *file) {
  CONF *conf = NCONF_new(nullptr);
  bool matters = true;
  ERR_set_mark();  // a file that does not parse leaves nothing in the caller's error queue
  if (long error_line = 0; file && conf && NCONF_load(conf, file, &error_line) == 1) {
    const char *init = NCONF_get_string(conf, nullptr, "openssl_conf");
    const STACK_OF(CONF_VALUE) *section = init ? NCONF_get_section(conf, init) : nullptr;
    matters = section && sk_CONF_VALUE_num(section) > 0;
  }
  ERR_pop_to_mark();
  NCONF_free(conf);
  return matters;
}

void init_openssl() {
  static std::once_flag once;
  std::call_once(once, [] {
    OPENSSL_init_crypto(config_matters() ? OPENSSL_INIT_LOAD_CONFIG : OPENSSL_INIT_NO_LOAD_CONFIG,
                        nullptr);
  });
}

}  // namespace progcache
