// run_beside (src/util/beside.hpp): both pieces of work run, on two threads where a thread can
// be had, on the caller's alone where none can; an exception from either reaches the caller.
#include "util/beside.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

#include "proc_util.hpp"

namespace {

struct Ran {
  std::thread::id beside, here;
  bool beside_ran = false, here_ran = false;
};

Ran run_both() {
  Ran r;
  progcache::run_beside(
      [&] {
        r.beside = std::this_thread::get_id();
        r.beside_ran = true;
      },
      [&] {
        r.here = std::this_thread::get_id();
        r.here_ran = true;
      });
  return r;
}

}  // namespace

TEST(Beside, RunsBothWorksOnTwoThreadsAndReturnsWhenBothEnded) {
  std::atomic<bool> beside_done{false};
  progcache::run_beside(
      [&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // ends after here()
        beside_done = true;
      },
      [] {});
  EXPECT_TRUE(beside_done) << "run_beside returned before the thread's work ended";
  const Ran r = run_both();
  EXPECT_TRUE(r.beside_ran);
  EXPECT_TRUE(r.here_ran);
  EXPECT_EQ(r.here, std::this_thread::get_id());
  EXPECT_NE(r.beside, r.here);
}

// A signal sent to the process while the thread runs must find one of the caller's threads:
// the library's own blocks them all. The caller's mask is left as it was.
TEST(Beside, TheThreadBlocksEverySignalAndTheCallersMaskStays) {
  sigset_t before, in_thread, after;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &before), 0);
  ASSERT_FALSE(sigismember(&before, SIGUSR1));
  progcache::run_beside([&] { pthread_sigmask(SIG_SETMASK, nullptr, &in_thread); }, [] {});
  for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGPROF, SIGCHLD, SIGHUP})
    EXPECT_TRUE(sigismember(&in_thread, sig)) << "signal " << sig << " not blocked beside";
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &after), 0);
  for (int sig = 1; sig < NSIG; ++sig)
    EXPECT_EQ(sigismember(&before, sig), sigismember(&after, sig)) << "signal " << sig;
}

TEST(Beside, AnExceptionFromEitherReachesTheCallerAfterBothEnded) {
  bool here_ran = false;
  EXPECT_THROW(
      progcache::run_beside([] { throw std::runtime_error("beside"); }, [&] { here_ran = true; }),
      std::runtime_error);
  EXPECT_TRUE(here_ran);
  std::atomic<bool> beside_done{false};
  try {
    progcache::run_beside(
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          beside_done = true;
        },
        [] { throw std::logic_error("here"); });
    ADD_FAILURE() << "here()'s exception was lost";
  } catch (const std::logic_error &e) {
    EXPECT_STREQ(e.what(), "here");
    EXPECT_TRUE(beside_done) << "unwound while the thread still used the caller's frame";
  }
  try {  // both fail: here()'s is the one rethrown
    progcache::run_beside([] { throw std::runtime_error("beside"); },
                          [] { throw std::logic_error("here"); });
    ADD_FAILURE() << "no exception";
  } catch (const std::logic_error &) {
  }
}

// Callers at once get threads beside them up to one per CPU but one (at least one); the rest run
// both works on their own thread, and every place is given back. Each beside() waits until all
// have begun theirs, so no place is given back before the last caller has asked for one.
TEST(Beside, AtMostOneThreadPerCpuButOneRunsBesideAtOnce) {
  const int places = progcache::beside_detail::max_threads();
  ASSERT_EQ(places, std::max(1, progcache::cpus_available() - 1));
  const int callers = places + 2;
  std::atomic<int> begun{0}, on_other_threads{0};
  std::atomic<bool> timed_out{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < callers; ++i)
    threads.emplace_back([&] {
      const std::thread::id caller = std::this_thread::get_id();
      progcache::run_beside(
          [&] {
            if (std::this_thread::get_id() != caller) ++on_other_threads;
            ++begun;
            const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
            while (begun.load() < callers && !timed_out)
              if (std::chrono::steady_clock::now() > deadline)
                timed_out = true;
              else
                std::this_thread::yield();
          },
          [] {});
    });
  for (std::thread &t : threads) t.join();
  ASSERT_FALSE(timed_out) << "some caller's beside() never began";
  EXPECT_EQ(on_other_threads.load(), places);
  EXPECT_EQ(progcache::beside_detail::running_now(), 0);
}

// A child forked while every place is held in its parent has none of those threads: it gets a
// thread beside it (a count copied from the parent would have left it none, ever).
TEST(Beside, AForkedChildCountsNoneOfItsParentsThreads) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer cannot start a thread in the child of a threaded process";
#endif
  const int places = progcache::beside_detail::max_threads();
  std::atomic<int> holding{0};
  std::atomic<bool> release{false};
  std::vector<std::thread> holders;
  for (int i = 0; i < places; ++i)
    holders.emplace_back([&] {
      progcache::run_beside(
          [&] {
            ++holding;
            while (!release) std::this_thread::yield();
          },
          [] {});
    });
  while (holding.load() < places) std::this_thread::yield();
  ASSERT_EQ(progcache::beside_detail::running_now(), places);
  const pid_t child = testutil::spawn([] {
    if (progcache::beside_detail::running_now() != 0) return 2;
    const Ran r = run_both();
    return r.beside_ran && r.here_ran && r.beside != r.here ? 0 : 1;
  });
  const int status = testutil::wait_for_or_kill(child, std::chrono::seconds(60));
  release = true;
  for (std::thread &t : holders) t.join();
  EXPECT_EQ(status, 0) << "2: the child counted its parent's threads; 1: it got no thread";
  EXPECT_EQ(progcache::beside_detail::running_now(), 0);
}

// Without address space for a thread's stack std::thread throws system_error: both works run
// here. In a fresh process, whose C library keeps no stack of an ended thread to reuse.
TEST(Beside, WithoutAThreadBothRunHere) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "RLIMIT_AS cannot be used with sanitizer runtimes";
#else
  EXPECT_EQ(testutil::run_test_in_fresh_process("Beside.DISABLED_WithoutAThreadChild",
                                                {{"PCACHE_TEST_BESIDE_CHILD", "1"}}),
            0);
#endif
}

TEST(Beside, DISABLED_WithoutAThreadChild) {  // run only by the test above
  if (!std::getenv("PCACHE_TEST_BESIDE_CHILD"))
    GTEST_SKIP() << "helper of WithoutAThreadBothRunHere";
  FILE *f = std::fopen("/proc/self/statm", "r");
  ASSERT_NE(f, nullptr);
  unsigned long pages = 0;
  ASSERT_EQ(std::fscanf(f, "%lu", &pages), 1);
  std::fclose(f);
  struct rlimit limit;
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &limit), 0);
  limit.rlim_cur = pages * size_t(::sysconf(_SC_PAGESIZE)) + (1ul << 20);  // no 8 MiB stack
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &limit), 0);
  const Ran r = run_both();
  EXPECT_TRUE(r.beside_ran);
  EXPECT_TRUE(r.here_ran);
  EXPECT_EQ(r.beside, std::this_thread::get_id());
  EXPECT_EQ(r.here, std::this_thread::get_id());
}
