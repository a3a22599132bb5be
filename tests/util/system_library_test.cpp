// The dlopen flags of the system libraries (src/util/system_library.hpp): libcrypto's and
// SQLite's own symbols bound inside them, except where a sanitizer runtime would end the process
// over it or a preloaded interposer must keep seeing their calls into libc; the others' never.
#include "util/system_library.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>

namespace {

// From here on, this process is killed by any open(2) or openat(2) (a seccomp filter; the
// x86-64 system call numbers, other architectures untouched). False where no filter can be set.
bool forbid_opening_files() {
#if defined(__x86_64__)
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 0, 4),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 1, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
#else
  return false;
#endif
}

}  // namespace

TEST(SystemLibrary, OwnSymbolsBindInsideUnlessSanitizedOrPreloaded) {
  using progcache::Binding;
  using progcache::system_library_open_flags;
  for (Binding binding : {Binding::process_scope, Binding::own_first})
    for (bool sanitizer : {false, true})
      for (bool preloaded : {false, true}) {
        const int flags = system_library_open_flags(binding, sanitizer, preloaded);
        EXPECT_EQ(flags & (RTLD_NOW | RTLD_LOCAL), RTLD_NOW | RTLD_LOCAL);
        EXPECT_EQ((flags & RTLD_DEEPBIND) != 0,
                  binding == Binding::own_first && !sanitizer && !preloaded)
            << "sanitizer " << sanitizer << ", preloaded " << preloaded;
      }
}

// A library's presence is told from the loader's list in memory. dlopen(RTLD_NOLOAD) of one that
// is not loaded searches the disk for it first (~20 us), which a warm drop-in process paid at each
// compile while libcrypto was not mapped: checked here in a child whose every open is fatal.
TEST(SystemLibrary, AbsentLibraryIsToldWithoutTouchingTheDisk) {
  EXPECT_TRUE(progcache::library_mapped("libc.so.6"));
  EXPECT_FALSE(progcache::library_mapped("libprogcache-no-such-library.so.7"));
  EXPECT_FALSE(progcache::library_mapped("libc.so"));  // the whole name, not a prefix
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!forbid_opening_files()) ::_exit(2);
    ::_exit(progcache::library_mapped("libprogcache-no-such-library.so.7") ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 2) GTEST_SKIP() << "no seccomp filter here";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "the child " << (WIFSIGNALED(status) ? "was killed opening a file" : "said it was mapped");
}

TEST(SystemLibrary, ALibraryLoadedLaterIsSeen) {
  // glibc's small libraries, one of which nothing here links
  const char *soname = nullptr;
  for (const char *name : {"libanl.so.1", "libutil.so.1", "libdl.so.2"})
    if (!progcache::library_mapped(name)) soname = name;
  if (!soname) GTEST_SKIP() << "each is mapped already";
  void *handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!handle) GTEST_SKIP() << "no " << soname << ": " << ::dlerror();
  EXPECT_TRUE(progcache::library_mapped(soname));
  ::dlclose(handle);
}

// `progcache run` preloads its helper (and, with --preload, the drop-ins beside it), which
// interpose only dlopen and the JIT libraries: they leave RTLD_DEEPBIND on. Anything else may
// interpose libc and turns it off.
TEST(SystemLibrary, OnlyProgcachesOwnPreloadsKeepOwnSymbolsInside) {
  using progcache::preload_interposes;
  EXPECT_FALSE(preload_interposes(""));
  EXPECT_FALSE(preload_interposes("  : "));
  EXPECT_FALSE(preload_interposes("/opt/pc/lib/progcache/nvrtc/libprogcache-run.so"));
  EXPECT_FALSE(preload_interposes("libprogcache-run.so"));
  EXPECT_FALSE(preload_interposes("/d/libnvrtc.so.13 /d/libnvvm.so.4:/d/libprogcache-run.so"));
  EXPECT_TRUE(preload_interposes("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"));
  EXPECT_TRUE(preload_interposes("/d/libprogcache-run.so /usr/lib/faketime/libfaketime.so.1"));
  EXPECT_TRUE(preload_interposes("/usr/lib/faketime/libfaketime.so.1:/d/libprogcache-run.so"));
  // A drop-in's name elsewhere, or bare, is not known to be ours.
  EXPECT_TRUE(preload_interposes("/d/libprogcache-run.so /e/libnvrtc.so.13"));
  EXPECT_TRUE(preload_interposes("/d/libprogcache-run.so libnvrtc.so.13"));
  EXPECT_TRUE(preload_interposes("/d/libprogcache-run.so.evil"));
}
