/* Stores a value in the default cache and reads it back: miss, then hit. */
#include <progcache/progcache.h>
#include <stdio.h>
#include <string.h>

int main(void) {
  pcache *cache = NULL;
  pcache_status st = pcache_open(NULL, NULL, &cache);
  if (st != PCACHE_OK) {
    fprintf(stderr, "progcache-demo: %s: %s\n", pcache_status_string(st), pcache_last_error());
    return 1;
  }
  const char key[] = "progcache-demo/hello";
  const char value[] = "hello from progcache";
  void *data = NULL;
  size_t size = 0;
  pcache_delete(cache, key, sizeof key - 1);
  st = pcache_get(cache, key, sizeof key - 1, &data, &size);
  printf("first lookup: %s\n", st == PCACHE_NOT_FOUND ? "miss" : pcache_status_string(st));
  pcache_put(cache, key, sizeof key - 1, value, sizeof value);
  st = pcache_get(cache, key, sizeof key - 1, &data, &size);
  printf("second lookup: %s (%s)\n", st == PCACHE_OK ? "hit" : pcache_status_string(st),
         st == PCACHE_OK ? (const char *)data : "");
  pcache_free(data);
  pcache_close(cache);
  return st == PCACHE_OK ? 0 : 1;
}
