/* Hits in a loop for an instruction profile: puts KEYS entries of SIZE bytes, hits them in turn
 * COUNT times to warm up, then COUNT times more between callgrind's start and stop marks (no-ops
 * outside valgrind), each a pcache_get and pcache_free. Instruction counts are exact where
 * timings on a shared machine are not; bench/analysis.md quotes them. Usage:
 *   valgrind --tool=callgrind --instr-atstart=no hit_profile URI [SIZE [KEYS [COUNT]]]
 *   callgrind_annotate --inclusive=yes callgrind.out.PID */
#include <progcache/progcache.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__has_include) && __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#else /* without valgrind's headers the program still runs; there is nothing to profile with */
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

static int hit_all(pcache *cache, int keys, int count) {
  char key[32];
  for (int i = 0; i < count; ++i) {
    snprintf(key, sizeof key, "k%d", i % keys);
    void *data = NULL;
    size_t size = 0;
    if (pcache_get(cache, key, strlen(key), &data, &size) != PCACHE_OK) return 1;
    pcache_free(data);
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 5) {
    fprintf(stderr, "usage: %s URI [SIZE [KEYS [COUNT]]]\n", argv[0]);
    return 2;
  }
  const size_t size = argc > 2 ? strtoul(argv[2], NULL, 10) : 4096;
  const int keys = argc > 3 ? atoi(argv[3]) : 1;
  const int count = argc > 4 ? atoi(argv[4]) : 6400;
  if (keys < 1 || count < 1) return 2;
  pcache *cache = NULL;
  char *value = malloc(size ? size : 1);
  if (!value || pcache_open(argv[1], NULL, &cache) != PCACHE_OK) {
    fprintf(stderr, "%s\n", pcache_last_error());
    return 1;
  }
  memset(value, 'v', size);
  char key[32];
  for (int i = 0; i < keys; ++i) {
    snprintf(key, sizeof key, "k%d", i);
    if (pcache_put(cache, key, strlen(key), value, size) != PCACHE_OK) {
      fprintf(stderr, "%s\n", pcache_last_error());
      return 1;
    }
  }
  int failed = hit_all(cache, keys, count);
  CALLGRIND_START_INSTRUMENTATION;
  failed |= hit_all(cache, keys, count);
  CALLGRIND_STOP_INSTRUMENTATION;
  if (failed)
    fprintf(stderr, "a hit missed: %s\n", pcache_last_error());
  else
    printf("%d hits of %zu bytes on %d keys\n", count, size, keys);
  pcache_close(cache);
  free(value);
  return failed;
}
