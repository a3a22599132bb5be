/* progcache-run-wait: what `progcache run` execs into once its command has started, so that the
 * process the shell waits for ends as a small C program does (cli/run_wait.h). Not for use by
 * hand: `progcache run` gives it the command's pid (its own child, kept across the exec), the
 * signal mask to wait with and the report file, and its environment is empty.
 *
 *   progcache-run-wait PID MASK REPORT
 *     PID     the command's pid
 *     MASK    the signals 1-64 blocked before `run` started the command, as a hex bit mask
 *             (bit N-1 is signal N)
 *     REPORT  the report file to say and remove, or "-" for none */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run_wait.h"

static int parse_unsigned(const char *text, int base, unsigned long long *value) {
  char *end = NULL;
  errno = 0;
  *value = strtoull(text, &end, base);
  return errno == 0 && end != text && *end == '\0' && text[0] != '-';
}

int main(int argc, char **argv) {
  unsigned long long pid = 0, bits = 0;
  if (argc != 4 || !parse_unsigned(argv[1], 10, &pid) || pid == 0 || pid > 0x7fffffff ||
      !parse_unsigned(argv[2], 16, &bits)) {
    fprintf(stderr, "progcache-run-wait: run by `progcache run` only (PID MASK REPORT)\n");
    return 2;
  }
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig = 1; sig <= 64; ++sig)
    if (bits & (1ULL << (sig - 1))) sigaddset(&mask, sig);
  sigset_t passed_on;
  pcache_run_passed_on_set(&passed_on);
  sigprocmask(SIG_BLOCK, &passed_on, NULL); /* blocked already, by the exec's caller */
  return pcache_run_wait((pid_t)pid, &mask, strcmp(argv[3], "-") == 0 ? NULL : argv[3]);
}
