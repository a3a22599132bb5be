/* A host that exports functions of the same names as some that SQLite and libcrypto call inside
 * themselves, as an executable with its own SQLite or OpenSSL linked in (or an RTLD_GLOBAL
 * module) does. The copies libprogcache opens must bind those calls to their own definitions,
 * never to the host's: each definition here counts the calls it captures and forwards them to
 * the library's own. Makes a key (BLAKE2b: libcrypto), opens a SQLite cache, puts and gets.
 * Prints "captured sqlite=<n> crypto=<n>"; exits 0 when nothing was captured, 1 when something
 * was, 2 when the cache itself failed, 77 (skipped) where libraries are preloaded, which keeps
 * the library's references going through the process's scope (src/util/system_library.hpp),
 * unless $PCACHE_PROBE_PRELOAD_IS_RUN_HELPER says the preload is `progcache run`'s helper.
 * usage: own_symbols_probe DIR */
#include <dlfcn.h>
#include <progcache/progcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int captured_sqlite, captured_crypto;

/* The definition inside the library soname, looked up in that library alone. */
static void *own_definition(const char *soname, const char *name) {
  void *library = dlopen(soname, RTLD_NOLOAD | RTLD_LAZY);
  return library ? dlsym(library, name) : NULL;
}

/* sqlite3_open_v2 finds its VFS through this. */
void *sqlite3_vfs_find(const char *name) {
  void *(*own)(const char *) =
      (void *(*)(const char *))own_definition(PCACHE_SQLITE_SONAME, "sqlite3_vfs_find");
  ++captured_sqlite;
  return own ? own(name) : NULL;
}

/* OPENSSL_zalloc, which a digest context's allocation uses, calls this. */
void *CRYPTO_zalloc(size_t num, const char *file, int line) {
  void *(*own)(size_t, const char *, int) = (void *(*)(size_t, const char *, int))own_definition(
      PCACHE_LIBCRYPTO_SONAME, "CRYPTO_zalloc");
  ++captured_crypto;
  return own ? own(num, file, line) : NULL;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  const char *preload = getenv("LD_PRELOAD");
  /* PCACHE_PROBE_PRELOAD_IS_RUN_HELPER: the test preloads `progcache run`'s helper alone. */
  const int run_helper = getenv("PCACHE_PROBE_PRELOAD_IS_RUN_HELPER") != NULL;
  if ((preload && *preload && !run_helper) || access("/etc/ld.so.preload", F_OK) == 0) {
    printf("skipped: libraries are preloaded\n");
    return 77;
  }
  static const char source[] = "__global__ void k(int *x) { *x = 1; }\n";
  pcache_program program;
  memset(&program, 0, sizeof program);
  program.struct_size = sizeof program;
  program.name = "k.cu";
  program.source = source;
  program.source_size = sizeof source - 1;
  uint8_t key[PCACHE_KEY_SIZE];
  char uri[4096];
  snprintf(uri, sizeof uri, "sqlite:%s/c.db", argv[1]);
  pcache *cache = NULL;
  void *data = NULL;
  size_t size = 0;
  if (pcache_make_key(&program, key) != PCACHE_OK || pcache_open(uri, NULL, &cache) != PCACHE_OK ||
      pcache_put(cache, key, sizeof key, "value", 5) != PCACHE_OK ||
      pcache_get(cache, key, sizeof key, &data, &size) != PCACHE_OK || size != 5 ||
      memcmp(data, "value", 5) != 0) {
    fprintf(stderr, "own_symbols_probe: %s\n", pcache_last_error());
    return 2;
  }
  pcache_free(data);
  pcache_close(cache);
  printf("captured sqlite=%d crypto=%d\n", captured_sqlite, captured_crypto);
  return captured_sqlite || captured_crypto ? 1 : 0;
}
