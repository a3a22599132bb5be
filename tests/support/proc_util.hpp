// Running test code in child processes.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "scratch.hpp"

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

// Waits up to timeout for pid; returns its exit code (as wait_for), or -1 when it had not exited
// by then: it is then killed (a child that hangs must fail its test, not stall the suite).
inline int wait_for_or_kill(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

// Runs the test `test` ("Suite.DISABLED_Name") of this test binary alone in a fresh process (the
// binary re-executed), with env set first: for what a process chooses once (a digest, a loaded
// library). Returns its exit code (0: passed), as wait_for.
inline int run_test_in_fresh_process(const std::string &test,
                                     const std::vector<std::pair<std::string, std::string>> &env) {
  const std::string filter = "--gtest_filter=" + test;
  return wait_for(spawn([&] {
    for (const auto &[name, value] : env) ::setenv(name.c_str(), value.c_str(), 1);
    ::execl("/proc/self/exe", "self", filter.c_str(), "--gtest_also_run_disabled_tests", nullptr);
    return 127;
  }));
}

// Whether this process has mapped libcrypto (what a fresh process's hit must not need).
inline bool libcrypto_mapped() {
  return read_file("/proc/self/maps").find("libcrypto.so") != std::string::npos;
}

// Runs fn in a child as an unprivileged user (nobody) when the tests run as root, so that file
// permissions apply; returns the child's exit code (0 = passed).
int run_unprivileged(const std::function<int()> &fn);

}  // namespace testutil
