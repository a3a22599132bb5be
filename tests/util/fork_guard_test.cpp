// process_id(): the pid a backend compares to notice that it runs in a fork's child, remembered
// instead of asked of the kernel on every hit. A child, and a child's child, must see its own.
#include "util/fork_guard.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include "proc_util.hpp"

using progcache::process_id;

TEST(ProcessId, EveryForkedGenerationSeesItsOwn) {
  const pid_t parent = ::getpid();
  ASSERT_EQ(process_id(), parent);
  const int rc = testutil::wait_for(testutil::spawn([&] {
    const pid_t child = ::getpid();
    if (process_id() != child) return 1;  // the parent's, remembered across the fork
    const int grandchild = testutil::wait_for(testutil::spawn(
        [&] { return process_id() == ::getpid() && process_id() != child ? 0 : 2; }));
    if (grandchild != 0) return 10 + grandchild;
    return process_id() == child ? 0 : 3;
  }));
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(process_id(), parent);
}
