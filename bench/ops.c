/* progcache-ops: identical work for any cache implementation, timed from outside.
 *   progcache-ops --uri URI --size BYTES --count N [--max-size BYTES] [--key-prefix P]
 * opens the cache, performs N puts of distinct keys, N hits of those keys, N misses, and prints
 * one JSON line {"put_us": ..., "hit_us": ..., "miss_us": ...} (mean microseconds per operation).
 * Uses the public C API only. */
#include <progcache/progcache.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int usage(void) {
  fprintf(stderr,
          "usage: progcache-ops --uri URI --size BYTES --count N [--max-size BYTES] [--key-prefix "
          "P]\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *uri = NULL;
  const char *prefix = "key-";
  long long size = -1, count = -1, max_size = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--uri") == 0)
      uri = argv[i + 1];
    else if (strcmp(argv[i], "--size") == 0)
      size = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--count") == 0)
      count = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--max-size") == 0)
      max_size = atoll(argv[i + 1]);
    else if (strcmp(argv[i], "--key-prefix") == 0)
      prefix = argv[i + 1];
    else
      return usage();
  }
  if (!uri || size < 0 || count <= 0 || argc % 2 == 0) return usage();
  pcache_options opts;
  pcache_options_init(&opts, sizeof opts);
  opts.max_size_bytes = (uint64_t)max_size;
  pcache *cache = NULL;
  pcache_status st = pcache_open(uri, &opts, &cache);
  if (st != PCACHE_OK) {
    fprintf(stderr, "progcache-ops: %s: %s\n", pcache_status_string(st), pcache_last_error());
    return 1;
  }
  char *value = malloc((size_t)size + 1);
  for (long long i = 0; i < size; ++i) value[i] = (char)(i * 131 + 7);
  char key[32];
  double t0 = now_us();
  for (long long i = 0; i < count; ++i) {
    int n = snprintf(key, sizeof key, "%.16s%lld", prefix, i);
    if ((st = pcache_put(cache, key, (size_t)n, value, (size_t)size)) != PCACHE_OK) {
      fprintf(stderr, "progcache-ops: put: %s\n", pcache_last_error());
      return 1;
    }
  }
  double t1 = now_us();
  long long hits = 0;
  for (long long i = 0; i < count; ++i) {
    int n = snprintf(key, sizeof key, "%.16s%lld", prefix, i);
    void *data;
    size_t got;
    if (pcache_get(cache, key, (size_t)n, &data, &got) == PCACHE_OK) ++hits;
    pcache_free(data);
  }
  double t2 = now_us();
  for (long long i = 0; i < count; ++i) {
    int n = snprintf(key, sizeof key, "absent-%lld", i);
    void *data;
    size_t got;
    if (pcache_get(cache, key, (size_t)n, &data, &got) != PCACHE_NOT_FOUND) {
      fprintf(stderr, "progcache-ops: unexpected hit\n");
      return 1;
    }
  }
  double t3 = now_us();
  printf("{\"put_us\": %.3f, \"hit_us\": %.3f, \"miss_us\": %.3f, \"hits\": %lld}\n",
         (t1 - t0) / count, (t2 - t1) / count, (t3 - t2) / count, hits);
  free(value);
  pcache_close(cache);
  return 0;
}
