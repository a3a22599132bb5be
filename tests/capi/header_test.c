/* The public header compiles alone as C99 with -pedantic -Werror. */
#include <progcache/progcache.h>
#include <progcache/progcache.h> /* and is idempotent */

int header_test_c(void) {
  pcache_options o;
  pcache_stats s;
  pcache_view v;
  pcache_program p;
  (void)o;
  (void)s;
  (void)v;
  (void)p;
  return PCACHE_OPEN_ALLOW_SHARED + PCACHE_OK + PCACHE_KEY_SIZE + (int)PCACHE_VERSION_NUMBER;
}
