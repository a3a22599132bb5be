// progcache run's gate: the command starts while `run` checks its cache, and waits before its
// main in the helper `run` preloads (run_preload/preload.c) until the check has passed. The two
// overlap (the check opens the cache: ~1 ms, about what exec and loading take the command), and
// the promise stays: a command whose cache is unusable never runs.
//
// Only a command whose first image is known to run the preloaded helper is gated: a dynamically
// linked ELF of this machine's kind and loader, not setuid, setgid or with file capabilities
// (the loader ignores LD_PRELOAD then), or a script whose interpreter is one. Any other command
// starts after the check, as it always did.
#pragma once

#include <sys/types.h>

#include <string>

namespace progcache::cli {

// Whether the command that posix_spawnp would run for argv0 (searched on $PATH as execvp
// searches it) runs the preloaded helper before anything of its own.
bool command_runs_helper_first(const char *argv0);

// The two ends of a gate. Not copyable; closes what it holds.
class Gate {
 public:
  // Makes the gate and sets PCACHE_RUN_GATE for the command's environment; false (errno set,
  // nothing set) when no socket pair can be had.
  bool open();
  // Called once the command was started (or failed to start): the command's end is closed here
  // and the variable removed from this process's environment.
  void started();
  // The check passed: the command goes on.
  void let_through();
  // The check failed: the command is stopped; true when it was waiting at the gate (it never ran
  // a line of its own), false when it had not reported in within a second (it may have started).
  bool stop(pid_t command);
  ~Gate();
  Gate() = default;
  Gate(const Gate &) = delete;
  Gate &operator=(const Gate &) = delete;

 private:
  int ours_ = -1, theirs_ = -1;
};

}  // namespace progcache::cli
