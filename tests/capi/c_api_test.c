/* A C99 program written from the header's documentation alone. Exits non-zero on failure. */
#include <progcache/progcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              pcache_last_error());                                                            \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

int main(void) {
  pcache_options opts;
  pcache *cache = NULL;
  void *data = NULL;
  size_t size = 0;
  uint64_t n = 0;
  pcache_stats stats;
  pcache_view view;
  uint8_t key[PCACHE_KEY_SIZE];
  pcache_program prog;
  const char *options[] = {"-arch=sm_90"};

  CHECK(pcache_version() == PCACHE_VERSION_NUMBER);
  CHECK(strcmp(pcache_version_string(), PCACHE_VERSION_STRING) == 0);
  CHECK(strcmp(pcache_status_string(PCACHE_NOT_FOUND), "not found") == 0);
  CHECK(strcmp(pcache_status_string(12345), "unknown status") == 0);
  CHECK(pcache_close(NULL) == PCACHE_OK);
  pcache_free(NULL);

  CHECK(pcache_options_init(&opts, 4) == PCACHE_ERR_INVALID_ARG);
  CHECK(strlen(pcache_last_error()) > 0);
  CHECK(pcache_options_init(&opts, sizeof opts) == PCACHE_OK);
  opts.max_size_bytes = 1 << 20;
  CHECK(pcache_open("nosuch:", &opts, &cache) == PCACHE_ERR_INVALID_ARG);
  CHECK(cache == NULL);
  CHECK(strstr(pcache_last_error(), "memory:") != NULL);
  CHECK(pcache_open("memory:", &opts, &cache) == PCACHE_OK);

  CHECK(pcache_get(cache, "k", 1, &data, &size) == PCACHE_NOT_FOUND);
  CHECK(pcache_put(cache, "k", 1, "hello", 5) == PCACHE_OK);
  CHECK(pcache_get(cache, "k", 1, &data, &size) == PCACHE_OK);
  CHECK(size == 5 && memcmp(data, "hello", 5) == 0);
  pcache_free(data);
  CHECK(pcache_get_view(cache, "k", 1, &view) == PCACHE_OK);
  CHECK(view.size == 5 && memcmp(view.data, "hello", 5) == 0);
  pcache_view_release(&view);
  CHECK(pcache_count(cache, &n) == PCACHE_OK && n == 1);
  CHECK(pcache_size(cache, &n) == PCACHE_OK && n == 5);
  memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  CHECK(pcache_get_stats(cache, &stats) == PCACHE_OK);
  CHECK(stats.hits == 2 && stats.misses == 1 && stats.puts == 1);
  CHECK(pcache_delete(cache, "k", 1) == PCACHE_OK);
  CHECK(pcache_delete(cache, "k", 1) == PCACHE_NOT_FOUND);
  CHECK(pcache_clear(cache) == PCACHE_OK);

  memset(&prog, 0, sizeof prog);
  prog.struct_size = sizeof prog;
  prog.source = "__global__ void k() {}";
  prog.options = options;
  prog.num_options = 1;
  CHECK(pcache_make_key(&prog, key) == PCACHE_OK);
  CHECK(pcache_put(cache, key, sizeof key, "cubin", 5) == PCACHE_OK);
  CHECK(pcache_get(cache, key, sizeof key, &data, &size) == PCACHE_OK);
  pcache_free(data);

  CHECK(pcache_close(cache) == PCACHE_OK);
  if (failures) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("c_api_test: all checks passed\n");
  return 0;
}
