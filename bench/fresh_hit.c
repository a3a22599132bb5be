/* The smallest application that uses the cache: opens the default cache, compiles one kernel
 * through it (a hit once warm), writes the cubin to a file, exits. bench/fresh_process.py times
 * it against read_write.c, the floor: a process that reads the same bytes from a file and writes
 * them out. Usage: fresh_hit KERNEL.cu OUT
 * With PCACHE_BENCH_PHASES=FILE it also writes the CLOCK_MONOTONIC time (ns) of each phase's end to
 * FILE, one a line: main reached, source read, cache opened, compiled (key, lookup, hit), cubin
 * written, cache closed; fresh_process.py adds the start and the end it sees from outside. */
#include <progcache/progcache.h>
#include <stdio.h>

#include "phase_marks.h"

int main(int argc, char **argv) {
  mark();
  if (argc != 3) return 2;
  FILE *in = fopen(argv[1], "rb");
  static char source[1 << 20];
  const size_t n = in ? fread(source, 1, sizeof source - 1, in) : 0;
  if (!in || n == 0) return 2;
  fclose(in);
  mark();
  const char *options[] = {"-arch=sm_90"};
  pcache_program program = {0};
  program.struct_size = sizeof program;
  program.name = argv[1];
  program.source = source;
  program.source_size = n;
  program.target = PCACHE_TARGET_CUBIN;
  program.options = options;
  program.num_options = 1;
  pcache *cache = NULL;
  pcache_compiled *compiled = NULL;
  if (pcache_open(NULL, NULL, &cache) != PCACHE_OK) {
    fprintf(stderr, "%s\n", pcache_last_error());
    return 1;
  }
  mark();
  if (pcache_compile(cache, &program, &compiled) != PCACHE_OK) {
    fprintf(stderr, "%s\n", pcache_last_error());
    return 1;
  }
  mark();
  size_t size = 0;
  const void *cubin = pcache_compiled_data(compiled, &size);
  FILE *out = fopen(argv[2], "wb");
  if (!out || fwrite(cubin, 1, size, out) != size || fclose(out) != 0) return 1;
  mark();
  pcache_compiled_free(compiled);
  pcache_close(cache);
  mark();
  write_marks();
  return 0;
}
