#include "util/openssl_init.hpp"

#include <atomic>
#include <cstdlib>
#include <optional>
#include <system_error>
#include <thread>

#include "util/fork_guard.hpp"
#include "util/libcrypto.hpp"
#include "util/openssl_config_memo.hpp"

namespace progcache {

PCACHE_SYSTEM_LIBRARY_GETTER(LibCrypto, libcrypto, PCACHE_LIBCRYPTO_SONAME, Binding::own_first,
                             PCACHE_LIBCRYPTO_FUNCTIONS)

bool libcrypto_in_process() {
  // Once yes, always: progcache never closes its own handle, and where a host closed the copy it
  // had loaded, the next digest loads libcrypto again, as a fresh process's does.
  static constinit std::atomic<bool> mapped{false};
  if (mapped.load(std::memory_order_relaxed)) return true;
  if (!library_mapped(PCACHE_LIBCRYPTO_SONAME)) return false;
  mapped.store(true, std::memory_order_relaxed);
  return true;
}

namespace {

// A file named by $OPENSSL_CONF is always loaded: the user asked for it.
bool config_matters() {
  if (const char *conf = std::getenv("OPENSSL_CONF"); conf && *conf) return true;
  const LibCrypto &crypto = libcrypto();
  char *file = crypto.CONF_get1_default_config_file();
  bool matters = true;
  try {
    const OpensslConfigMemo memo(file, crypto.OpenSSL_version_num());
    const std::optional<bool> known = memo.recall();
    matters = known ? *known : openssl_config_matters(file);
    if (!known) memo.remember(matters);
  } catch (...) {  // out of memory: load the file, as OpenSSL would
    matters = true;
  }
  crypto.CRYPTO_free(file, OPENSSL_FILE, OPENSSL_LINE);
  return matters;
}

bool section_is_set(const char *file) {
  const LibCrypto &crypto = libcrypto();
  CONF *conf = crypto.NCONF_new(nullptr);
  bool matters = true;
  if (long error_line = 0; conf && crypto.NCONF_load(conf, file, &error_line) == 1) {
    const char *init = crypto.NCONF_get_string(conf, nullptr, "openssl_conf");
    const STACK_OF(CONF_VALUE) *section = init ? crypto.NCONF_get_section(conf, init) : nullptr;
    matters =
        section && crypto.OPENSSL_sk_num(reinterpret_cast<const OPENSSL_STACK *>(section)) > 0;
  }
  crypto.NCONF_free(conf);
  return matters;
}

}  // namespace

bool openssl_config_matters(const char *file) {
  if (!file) return true;
  // Parsed on a thread of its own: a file that does not parse leaves OpenSSL's errors on that
  // thread's queue, which ends with it, and the caller's queue is never touched. Guarding the
  // caller's queue with ERR_set_mark instead cost 0.93M instructions, more than the parse: the
  // first error state of a thread loads every error string, and OpenSSL makes none while
  // nothing fails. A thread costs ~50k.
  bool matters = true;
  try {
    std::thread parser([&] { matters = section_is_set(file); });
    parser.join();
  } catch (const std::system_error &) {  // no thread to be had: here, under a mark
    libcrypto().ERR_set_mark();
    matters = section_is_set(file);
    libcrypto().ERR_pop_to_mark();
  }
  return matters;
}

bool init_openssl() {
  // A ForkSafeOnce, not std::call_once: a fork() in another thread must not leave the child
  // waiting on a set-up under way, and an exception (libcrypto cannot load) must not unwind
  // through pthread_once (ThreadSanitizer's interceptor, built without exceptions, is left with
  // ignores turned on).
  static constinit ForkSafeOnce once;
  static constinit bool loaded = false;
  once.run([] {
    loaded = config_matters();
    libcrypto().OPENSSL_init_crypto(loaded ? OPENSSL_INIT_LOAD_CONFIG : OPENSSL_INIT_NO_LOAD_CONFIG,
                                    nullptr);
  });
  return loaded;
}

}  // namespace progcache
