/* zstd, hiredis, libcrypto, SQLite and xxHash are opened by the features that use them (src/util/
 * system_library.hpp, src/util/libcrypto.hpp, src/backends/sqlite_library.hpp, src/util/
 * xxhash.hpp): a process that never compresses an entry, opens a Redis or SQLite cache, derives a
 * key or hashes a large entry never maps them (each costs start-up time; libcrypto the most), and
 * one that does gets them when it needs them. */
#include <progcache/progcache.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, __LINE__, #cond, \
              pcache_last_error());                                                           \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

static int mapped(const char *name) {
  FILE *maps = fopen("/proc/self/maps", "r");
  char line[4096];
  int found = 0;
  while (maps && fgets(line, sizeof line, maps))
    if (strstr(line, name)) found = 1;
  if (maps) fclose(maps);
  return found;
}

/* A put of a value of n bytes (at most 64 KiB) and gets of it, each checked. */
static int put_and_get_times(const char *uri, size_t n, int gets) {
  static char value[65536];
  pcache *cache = NULL;
  memset(value, 'a', sizeof value);
  if (pcache_open(uri, NULL, &cache) != PCACHE_OK) return 0;
  int ok = pcache_put(cache, "k", 1, value, n) == PCACHE_OK;
  for (int i = 0; ok && i < gets; ++i) {
    void *data = NULL;
    size_t size = 0;
    ok = pcache_get(cache, "k", 1, &data, &size) == PCACHE_OK && size == n &&
         memcmp(data, value, size) == 0;
    pcache_free(data);
  }
  return pcache_close(cache) == PCACHE_OK && ok;
}

static int put_and_get_n(const char *uri, size_t n) {
  return put_and_get_times(uri, n, 1);
}

static int put_and_get(const char *uri) {
  return put_and_get_n(uri, 65536);
}

int main(void) {
  char dir[] = "/tmp/pcache-lazy-XXXXXX", uri[256];
  CHECK(mkdtemp(dir) != NULL);
  CHECK(pcache_version() == PCACHE_VERSION_NUMBER);
  CHECK(!mapped("libsqlite3.so"));
  CHECK(!mapped("libxxhash.so"));
  CHECK(put_and_get_n("memory:", 4096));
  CHECK(!mapped("libsqlite3.so"));
  CHECK(!mapped("libxxhash.so"));
  /* Small entries are checked and named by the library's own XXH3: a fresh process's hit of a
   * small entry maps nothing for it. A 64 KiB one is hashed by libxxhash's vector code. */
  snprintf(uri, sizeof uri, "filestream:%s/fs", dir);
  CHECK(put_and_get_n(uri, 4096));
  snprintf(uri, sizeof uri, "sqlite:%s/small.db", dir);
  CHECK(put_and_get_n(uri, 4096));
  CHECK(mapped("libsqlite3.so"));
  CHECK(!mapped("libxxhash.so"));
  /* However many: libxxhash's AVX-512 code made a 4 KiB hit between system calls slower, not
   * faster (the vector unit's warm-up; docs/performance.md). 300 hits hash 1.2 MiB. */
  snprintf(uri, sizeof uri, "filestream:%s/many", dir);
  CHECK(put_and_get_times(uri, 4096, 300));
  CHECK(!mapped("libxxhash.so"));
  snprintf(uri, sizeof uri, "filestream:%s/fs", dir);
  CHECK(put_and_get(uri));
  CHECK(mapped("libxxhash.so"));
  CHECK(put_and_get("memory:"));
  snprintf(uri, sizeof uri, "sqlite:%s/plain.db", dir);
  CHECK(put_and_get(uri));
  CHECK(!mapped("libzstd.so"));
  CHECK(!mapped("libhiredis.so"));
  CHECK(!mapped("libcrypto.so"));
  const char *options[] = {"-arch=sm_90"};
  pcache_program program;
  memset(&program, 0, sizeof program);
  program.struct_size = sizeof program;
  program.name = "k.cu";
  program.source = "__global__ void k() {}";
  program.options = options;
  program.num_options = 1;
  program.nvrtc_version = 13000;
  uint8_t key[PCACHE_KEY_SIZE], again[PCACHE_KEY_SIZE];
  CHECK(pcache_make_key(&program, key) == PCACHE_OK);
  CHECK(mapped("libcrypto.so"));
  CHECK(pcache_make_key(&program, again) == PCACHE_OK && memcmp(key, again, sizeof key) == 0);
  snprintf(uri, sizeof uri, "sqlite:%s/zstd.db?compress=zstd", dir);
  CHECK(put_and_get(uri));
  CHECK(mapped("libzstd.so"));
  CHECK(!mapped("libhiredis.so"));
  /* Nothing listens on port 1: the open or the first call fails, after loading hiredis. */
  pcache *redis = NULL;
  if (pcache_open("redis://127.0.0.1:1/0?timeout_ms=200", NULL, &redis) == PCACHE_OK) {
    void *data = NULL;
    size_t size = 0;
    CHECK(pcache_get(redis, "k", 1, &data, &size) != PCACHE_OK);
    pcache_close(redis);
  }
  CHECK(mapped("libhiredis.so"));
  char command[300];
  snprintf(command, sizeof command, "rm -rf %s", dir);
  CHECK(system(command) == 0);
  puts("lazy libraries: ok");
  return 0;
}
