/* The phase marks bench/fresh_hit.c and bench/floor_hit.c write for bench/fresh_process.py: mark()
 * records the CLOCK_MONOTONIC time (ns) at the end of a phase; write_marks() writes them, one a
 * line, to the file PCACHE_BENCH_PHASES names (nothing when it is unset). Included once per
 * program. */
#ifndef PCACHE_BENCH_PHASE_MARKS_H
#define PCACHE_BENCH_PHASE_MARKS_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long marks[8];
static int marked;

static void mark(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (marked < 8) marks[marked++] = (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void write_marks(void) {
  const char *path = getenv("PCACHE_BENCH_PHASES");
  FILE *f = path && *path ? fopen(path, "w") : NULL;
  for (int i = 0; f && i < marked; ++i) fprintf(f, "%lld\n", marks[i]);
  if (f) fclose(f);
}

#endif
