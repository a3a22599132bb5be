/* progcache run's last part: waiting for the command, passing on the signals that stop or poke a
 * job, saying what the command's compiles did and ending as the command ended.
 *
 * Plain C and libc, so that it can run in a process of its own: once the command has started and
 * the cache check has passed, `progcache run` execs `progcache-run-wait` (cli/run_wait_main.c,
 * beside the drop-ins), and the process the shell waits for is from then on that small program,
 * not the CLI with its C++ runtime and the library (whose exit cost `run` ~0.6 ms after every
 * command on a 2-core VM: bench/analysis.md). An exec keeps the pid, the children, the signal mask,
 * pending signals and ignored dispositions, so the command stays this process's child. Where that
 * program cannot be run, the CLI calls pcache_run_wait in its own process: one implementation. */
#ifndef PROGCACHE_CLI_RUN_WAIT_H
#define PROGCACHE_CLI_RUN_WAIT_H

#include <signal.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Makes a new report file from path_template (mkstemp's, which it fills in): the header, zeroed,
 * that the command's processes count their compiles into. Returns 1, or 0 with no file left and
 * the reason said on stderr (the command then runs unreported). */
int pcache_run_create_report(char *path_template);

/* The signals passed on to the command (those a process manager or a job's timeout sends to stop
 * or poke a job: SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) and SIGCHLD: blocked from before the command
 * starts until the wait lets them through. */
void pcache_run_passed_on_set(sigset_t *set);

/* Waits for child with mask (the mask from before the passed-on set was blocked) as the signal
 * mask while waiting; each passed-on signal that arrives meanwhile is sent on to child. SIGINT and
 * SIGQUIT are ignored: they come from the terminal to the whole process group, which child is in.
 * Then, where report_file is not NULL, says on stderr what the command's processes counted there
 * (src/core/run_report.hpp lays the file out) and removes it. Returns the exit status to end with,
 * or does not return: a command killed by SIGINT, SIGTERM, SIGHUP or SIGPIPE ends this process by
 * the same signal (so that a shell or make sees a job interrupted, not one that failed).
 * On entry the passed-on set must be blocked (pcache_run_passed_on_set). */
int pcache_run_wait(pid_t child, const sigset_t *mask, const char *report_file);

#ifdef __cplusplus
}
#endif

#endif
