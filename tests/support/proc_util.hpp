// Running test code in child processes.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

namespace testutil {

// Forks; the child runs fn and _exit()s with its return value. Returns the pid.
inline pid_t spawn(const std::function<int()> &fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 99;
    try {
      rc = fn();
    } catch (...) {
    }
    ::_exit(rc);
  }
  return pid;
}

// Waits for pid; returns its exit code, or 128 + signal.
inline int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// Runs fn in a child as an unprivileged user (nobody) when the tests run as root, so that file
// permissions apply; returns the child's exit code (0 = passed).
int run_unprivileged(const std::function<int()> &fn);

}  // namespace testutil
