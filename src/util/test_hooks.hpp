// Switches that let tests reach what a test machine cannot produce: a setuid process, a network
// file system, a FIPS provider without BLAKE2b, a failing disk. They exist only in the copies of
// the library a test build links (compiled with PCACHE_TEST_HOOKS: tests/CMakeLists.txt); the
// library that is installed and packaged answers "no" to each without reading anything, so no
// environment variable of a production process can switch one on.
#pragma once

namespace progcache::test_hooks {

// PCACHE_TEST_FAKE_SECURE=1: behave as a setuid/setgid process (only ever stricter).
bool fake_secure();
// PCACHE_TEST_FAKE_NETFS=NAME: the cache directory is on a network file system of that name;
// nullptr when not set.
const char *fake_netfs();
// PCACHE_TEST_FORCE_SHA256 set: key with SHA-256, as under a FIPS provider.
bool force_sha256();
// PCACHE_TEST_FETCH_DIGESTS set: the key's BLAKE2b is fetched, as where a configuration is loaded,
// never taken from the default provider directly (util/openssl_digest.hpp).
bool fetch_digests();
// PCACHE_TEST_REFUSE_LIBRARY=a,b: a system library (util/system_library.hpp) whose SONAME starts
// with a or b is refused, as dlopen refuses a library that is not installed.
bool refuse_library(const char *soname);
// PCACHE_TEST_FAKE_SQLITE_VERSION=N: the SQLite library reports version number N (3035000 is
// 3.35.0); 0 when not set.
int fake_sqlite_version();
// PCACHE_TEST_SLOW_LIBRARY_LOAD_MS=N: a system library's first load waits N ms before dlopen (a
// fork() in another thread meets it under way); 0 when not set.
int library_load_delay_ms();

// The file-stream backend's system calls (util/fsutil.hpp: the sys:: wrappers, and make_dir_at
// for make_dir), which a test can make fail: a hook returns 0 to let the call run, an errno value
// to fail it with, or kShortWrite (write only) to write half of what was asked.
enum class FsOp { create_temp, write, fsync, rename, open_entry, read, unlink, make_dir };
inline constexpr int kShortWrite = -1;
using FaultHook = int (*)(FsOp op);
void set_fault_hook(FaultHook hook);  // a no-op without PCACHE_TEST_HOOKS
// The hook set, else what PCACHE_TEST_FS_FAULT says for a process the test cannot reach into (one
// it starts): of the calls that write (create_temp, write, fsync, rename), counted from 1,
// "full:K" fails the K-th and every later one with ENOSPC (the disk fills), "kill:K" ends the
// process with SIGKILL at the K-th, "count:PATH" writes how many there have been to PATH after
// each.
int fault(FsOp op);

}  // namespace progcache::test_hooks
