/* progcache run's wait and report (cli/run_wait.h). */
#define _GNU_SOURCE
#include "run_wait.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The report file's layout, as src/core/run_report.hpp has it: a header (this magic, then hits,
 * misses and uncached compiles, each a native uint64) that every process of the command maps and
 * adds to, then lines "WHAT\tPATH\tDETAIL". */
static const char kReportMagic[8] = {'P', 'C', 'R', 'U', 'N', 0, 0, 1};
enum { kReportHeaderSize = 32 };

int pcache_run_create_report(char *path_template) {
  const int fd = mkostemp(path_template, O_CLOEXEC);
  int written = 0;
  if (fd >= 0) {
    char header[kReportHeaderSize] = {0};
    memcpy(header, kReportMagic, sizeof kReportMagic);
    const ssize_t n = write(fd, header, sizeof header);
    if (n >= 0 && n != (ssize_t)sizeof header) errno = ENOSPC;
    written = n == (ssize_t)sizeof header;
    const int saved = errno;
    close(fd);
    if (!written) unlink(path_template);
    errno = saved;
  }
  if (!written)
    fprintf(stderr,
            "progcache run: cannot make a report file in /tmp (%s): the command's compiles go "
            "unreported\n",
            strerror(errno));
  return written;
}

static const int kPassedOn[] = {SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
static volatile sig_atomic_t g_command_pid = 0;

static void pass_on(int sig) {
  const int saved = errno;
  if (g_command_pid > 0) kill((pid_t)g_command_pid, sig);
  errno = saved;
}

static void wake(int sig) {
  (void)sig;
} /* SIGCHLD: ends sigsuspend (ignored, it would not) */

void pcache_run_passed_on_set(sigset_t *set) {
  sigemptyset(set);
  for (size_t i = 0; i < sizeof kPassedOn / sizeof kPassedOn[0]; ++i) sigaddset(set, kPassedOn[i]);
  sigaddset(set, SIGCHLD);
}

/* In sigsuspend, not a blocking waitpid: a signal that lands while the process sits in waitpid
 * may be handled only once waitpid returns (so under ThreadSanitizer, which defers signals to a
 * safe point), i.e. after the command ended on its own. */
static int wait_for(pid_t child, const sigset_t *unblocked) {
  int status = 0;
  for (;;) {
    const pid_t got = waitpid(child, &status, WNOHANG);
    if (got == child) return status;
    if (got < 0 && errno != EINTR) return 0;
    if (got == 0) sigsuspend(unblocked);
  }
}

/* The whole file, NUL-terminated, or NULL; *size its length. */
static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "re");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *text = malloc(cap + 1);
  for (size_t got; text && (got = fread(text + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      char *grown = realloc(text, 2 * cap + 1);
      if (!grown) break; /* what was read is reported */
      text = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (text) text[n] = '\0';
  *size = n;
  return text;
}

/* One line of the report: three fields, each a span of the text. */
typedef struct {
  const char *what, *path, *detail;
  int what_len, path_len, detail_len;
} report_line;

/* A field's length as printf's %.*s takes it: a line's fields are short (the library cuts a reason
 * at 240 bytes, a path is at most PATH_MAX), but the file is written by the command's processes. */
static int field_length(const char *from, const char *to) {
  const size_t n = (size_t)(to - from);
  return n < 65536 ? (int)n : 65536;
}

/* The line at *at (moved past it); 0 at the end of text. A line without two tabs has an empty
 * what, which matches no kind. */
static int next_line(const char **at, const char *end, report_line *line) {
  if (*at >= end) return 0;
  const char *stop = memchr(*at, '\n', (size_t)(end - *at));
  if (!stop) stop = end;
  const char *tab = memchr(*at, '\t', (size_t)(stop - *at));
  const char *tab2 = tab ? memchr(tab + 1, '\t', (size_t)(stop - tab - 1)) : NULL;
  memset(line, 0, sizeof *line);
  if (tab2)
    *line = (report_line){*at,
                          tab + 1,
                          tab2 + 1,
                          field_length(*at, tab),
                          field_length(tab + 1, tab2),
                          field_length(tab2 + 1, stop)};
  *at = stop + 1;
  return 1;
}

static int is(const report_line *line, const char *what) {
  return line->what_len == (int)strlen(what) && memcmp(line->what, what, strlen(what)) == 0;
}

/* Says each line of the kind what in the report's body, as "before PATH between DETAIL after". */
static void say_each(const char *body, const char *end, const char *what, const char *before,
                     const char *between, const char *after) {
  report_line line;
  for (const char *at = body; next_line(&at, end, &line);)
    if (is(&line, what))
      fprintf(stderr, "progcache run: %s%.*s%s%.*s%s\n", before, line.path_len, line.path, between,
              line.detail_len, line.detail, after);
}

/* What the command's processes wrote to the report (a count of each compile through any progcache
 * cache, a line for each NVRTC the helper redirected or could not), said on stderr, so that a
 * command whose compiles did not go through the cache never looks cached. */
static void say_what_happened(const char *report_file, int command_ran) {
  size_t size = 0;
  char *text = read_file(report_file, &size);
  uint64_t counts[3] = {0, 0, 0}; /* hits, misses, uncached */
  if (text && size >= kReportHeaderSize && memcmp(text, kReportMagic, sizeof kReportMagic) == 0)
    memcpy(counts, text + sizeof kReportMagic, sizeof counts);
  const char *body = text ? text + (size < kReportHeaderSize ? size : kReportHeaderSize) : NULL;
  const char *end = text ? text + size : NULL;
  report_line line;
  /* The first four reasons not to cache that differ (three are said, a fourth says "..."). */
  report_line why[4];
  int reasons = 0, bypassed = 0;
  for (const char *at = body; next_line(&at, end, &line);) {
    bypassed += is(&line, "bypass");
    if (!is(&line, "uncached") || reasons == 4) continue;
    int seen = 0;
    for (int i = 0; i < reasons && !seen; ++i)
      seen = why[i].detail_len == line.detail_len &&
             memcmp(why[i].detail, line.detail, (size_t)line.detail_len) == 0;
    if (!seen) why[reasons++] = line;
  }
  const unsigned long long hits = counts[0], misses = counts[1], not_cached = counts[2];
  if (hits > 0 || misses > 0)
    fprintf(stderr,
            "progcache run: %llu compile(s) through the cache: %llu hit(s), %llu miss(es)\n",
            hits + misses, hits, misses);
  if (not_cached > 0) {
    fprintf(stderr, "progcache run: %llu compile(s) not cached: ", not_cached);
    for (int i = 0; i < reasons && i < 3; ++i)
      fprintf(stderr, "%s%.*s", i ? "; " : "", why[i].detail_len, why[i].detail);
    fprintf(stderr, "%s\n", reasons > 3 ? "; ..." : "");
  }
  /* Said, so that a command whose compiles never reach the drop-ins (NVRTC linked statically, a
   * JIT of its own) does not look cached for lack of a word. */
  if (command_ran && hits + misses + not_cached == 0 && bypassed == 0)
    fprintf(stderr,
            "progcache run: nothing was compiled through the cache (no NVRTC, nvJitLink or "
            "libNVVM call reached the drop-ins; a program linked with them statically calls its "
            "own copy)\n");
  say_each(body, end, "bypass", "the command loaded ", " itself (",
           "): its compiles were not cached");
  say_each(body, end, "other", "the command asked for ", " (the drop-in used ",
           ", named by its PCACHE_*_LIBRARY variable)");
  free(text);
}

/* Ends this process as the command ended: killed by the same signal where that is how it ended
 * and the signal does not dump core, else with its exit status (128 + the signal for the rest, as
 * a shell reports). */
static int end_as(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGPIPE) {
      fflush(NULL);
      signal(sig, SIG_DFL);
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, sig);
      sigprocmask(SIG_UNBLOCK, &set, NULL);
      raise(sig);
    }
    return 128 + sig;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int pcache_run_wait(pid_t child, const sigset_t *mask, const char *report_file) {
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  g_command_pid = child;
  struct sigaction forward;
  memset(&forward, 0, sizeof forward);
  forward.sa_handler = pass_on;
  forward.sa_flags = SA_RESTART;
  sigemptyset(&forward.sa_mask);
  for (size_t i = 0; i < sizeof kPassedOn / sizeof kPassedOn[0]; ++i)
    sigaction(kPassedOn[i], &forward, NULL);
  struct sigaction child_ended;
  memset(&child_ended, 0, sizeof child_ended);
  child_ended.sa_handler = wake;
  sigemptyset(&child_ended.sa_mask);
  sigaction(SIGCHLD, &child_ended, NULL);
  const int status = wait_for(child, mask);
  g_command_pid = 0; /* reaped: its pid may name another process from now on */
  signal(SIGCHLD, SIG_DFL);
  sigprocmask(SIG_SETMASK, mask, NULL);
  if (report_file) {
    /* 126 and 127: as `run` says when the command cannot be run at all. */
    const int ran =
        !(WIFEXITED(status) && (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127));
    say_what_happened(report_file, ran);
    unlink(report_file);
  }
  return end_as(status);
}
