// The counters every process shares (pcache_get_shared_stats): what they count, that they add
// up across handles, and that the file-stream stats file keeps them compatibly.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <progcache/progcache.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "test_util.hpp"

using testutil::Handle;

namespace {

class SharedStats : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testutil::make_scratch_dir("shared"); }
  void TearDown() override { testutil::remove_tree(dir_); }
  std::string dir_;
};

// A loopback server that accepts connections (with flags: SOCK_NONBLOCK to count them) and never
// answers: every call to it times out. Its port; *fd is the listening socket.
int silent_server(int flags, int *fd) {
  *fd = ::socket(AF_INET, SOCK_STREAM | flags, 0);
  EXPECT_GE(*fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  EXPECT_EQ(::bind(*fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr), 0);
  EXPECT_EQ(::listen(*fd, 128), 0);
  EXPECT_EQ(::getsockname(*fd, reinterpret_cast<sockaddr *>(&addr), &len), 0);
  return ntohs(addr.sin_port);
}

pcache_shared_stats shared(pcache *c) {
  pcache_shared_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_shared_stats(c, &s), PCACHE_OK) << pcache_last_error();
  return s;
}

// The one entry file of a file-stream cache (entries live in two-hex-digit shard directories).
std::string only_entry(const std::string &fs) {
  std::vector<std::string> files;
  for (const std::string &f : testutil::list_files(fs))
    if (f.size() > fs.size() + 4 && f[fs.size() + 3] == '/') files.push_back(f);
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? "" : files[0];
}

void flip_byte(const std::string &path, long offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(offset);
  const char c = char(f.get());
  f.seekp(offset);
  f.put(char(c ^ 0x40));
}

}  // namespace

// Damage found by one process and a compile that could not be stored are recorded in the store,
// so the next process (and `progcache stats`) sees them.
TEST_F(SharedStats, DamageAndUncacheableCompilesAreSharedAcrossHandles) {
  for (const std::string &uri : {"sqlite:" + dir_ + "/s.db", "filestream:" + dir_ + "/fs"}) {
    {
      Handle h(uri);
      ASSERT_EQ(h.put("k", std::string(4096, 'v')), PCACHE_OK);
    }
    if (uri.rfind("filestream:", 0) == 0) {
      flip_byte(only_entry(dir_ + "/fs"), 300);
    } else {
      // A foreign record written straight into the table: it cannot pass verification.
      sqlite3 *db = nullptr;
      ASSERT_EQ(sqlite3_open((dir_ + "/s.db").c_str(), &db), SQLITE_OK);
      ASSERT_EQ(
          sqlite3_exec(db, "UPDATE entries SET record = zeroblob(200)", nullptr, nullptr, nullptr),
          SQLITE_OK);
      sqlite3_close(db);
    }
    {
      Handle h(uri);
      std::string got;
      EXPECT_EQ(h.get("k", &got), PCACHE_NOT_FOUND) << uri;
      const std::string source = "__global__ void k(const char **s) { *s = __DATE__; }\n";
      const char *options[] = {"-arch=sm_90"};
      pcache_program p = testutil::make_program("d.cu", source, options, 1);
      pcache_compiled *r = nullptr;
      ASSERT_EQ(pcache_compile(h, &p, &r), PCACHE_OK) << pcache_last_error();
      pcache_compiled_free(r);
    }
    Handle later(uri);
    const pcache_shared_stats s = shared(later);
    EXPECT_EQ(s.corrupt, 1) << uri;
    EXPECT_EQ(s.uncacheable, 1) << uri;
    // The damaged get, and the compile: whether it can be stored is known once NVRTC was seen
    // to read __DATE__'s text, so it looked up (nothing recorded) and missed.
    EXPECT_EQ(s.misses, 2) << uri;
    EXPECT_EQ(s.tier_errors, 0) << uri;
  }
}

// A tiered stack whose remote tier is down records the failures in the tier that answered, and
// tells the ones where the remote tier did not answer in time from the others.
TEST_F(SharedStats, TierErrorsAreRecordedInTheTiersThatAnswer) {
  // Each store that keeps shared counters (the file-stream store once dropped tier_timeouts).
  for (const std::string &local : {"sqlite:" + dir_ + "/local.db", "filestream:" + dir_ + "/fs"}) {
    {
      // A port nothing listens on: every call on the Redis tier fails at once (refused).
      Handle stack("tiered:" + local + "|redis://127.0.0.1:1/0?timeout_ms=200&backoff_ms=0");
      ASSERT_NE(stack.get(), nullptr);
      std::string got;
      EXPECT_EQ(stack.get("a", &got), PCACHE_NOT_FOUND);
      ASSERT_EQ(stack.put("a", "v"), PCACHE_OK) << "the local tier takes it";
      EXPECT_GE(stack.stats().tier_errors, 2u);
      pcache_shared_stats s{};
      s.struct_size = sizeof s;
      EXPECT_EQ(pcache_get_shared_stats(stack, &s), PCACHE_ERR_UNSUPPORTED);
    }
    {
      Handle tier(local);
      EXPECT_GE(shared(tier).tier_errors, 2) << local;
      EXPECT_EQ(shared(tier).tier_timeouts, 0) << local << ": a refused connection is no timeout";
    }
    int silent = -1;
    const int port = silent_server(0, &silent);
    {
      Handle stack("tiered:" + local + "|redis://127.0.0.1:" + std::to_string(port) +
                   "/0?timeout_ms=100&backoff_ms=0");
      std::string got;
      EXPECT_EQ(stack.get("b", &got), PCACHE_NOT_FOUND);
    }
    ::close(silent);
    Handle tier(local);
    EXPECT_GE(shared(tier).tier_timeouts, 1) << local;
    EXPECT_GE(shared(tier).tier_errors, 3) << local;
  }
}

// The counters added in 0.4 live in their own checksummed block after the ones 0.3 wrote: a
// stats file from 0.3 (no block) reads them as zero and keeps the rest; a damaged block costs
// only those counters.
TEST_F(SharedStats, FileStreamStatsFileStaysCompatible) {
  const std::string fs = dir_ + "/fs", uri = "filestream:" + fs;
  {
    Handle h(uri);
    ASSERT_EQ(h.put("k", "v"), PCACHE_OK);
    std::string got;
    ASSERT_EQ(h.get("k", &got), PCACHE_OK);
    ASSERT_EQ(h.get("nope", &got), PCACHE_NOT_FOUND);
  }
  std::string stats = testutil::read_file(fs + "/stats");
  ASSERT_EQ(stats.size(), 37u * 8)
      << "9 words as 0.3 wrote them, the 6-word block of 0.4, the directory's stamp and the "
         "19-word block of counters added since 0.4";
  std::string old_format = stats.substr(0, 9 * 8);
  testutil::write_file(fs + "/stats", old_format);
  {
    Handle h(uri);
    const pcache_shared_stats s = shared(h);
    EXPECT_EQ(s.hits, 1);
    EXPECT_EQ(s.misses, 1);
    EXPECT_EQ(s.corrupt, 0);
    EXPECT_EQ(h.count(), 1u);
  }
  // A later write brings the block back; damaging it zeroes only what it holds.
  {
    Handle h(uri);
    ASSERT_EQ(h.put("e", "v"), PCACHE_OK);
    std::string got;
    ASSERT_EQ(h.get("e", &got), PCACHE_OK);
  }
  stats = testutil::read_file(fs + "/stats");
  ASSERT_EQ(stats.size(), 37u * 8);
  stats[11 * 8] ^= 1;  // the uncacheable counter, under the block's checksum
  testutil::write_file(fs + "/stats", stats);
  Handle h(uri);
  const pcache_shared_stats s = shared(h);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.uncacheable, 0) << "a block that fails its check is not believed";
}

TEST_F(SharedStats, ArgumentsAreChecked) {
  Handle h("memory:");
  pcache_shared_stats s{};
  s.struct_size = 8;
  EXPECT_EQ(pcache_get_shared_stats(h, &s), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_get_shared_stats(h, nullptr), PCACHE_ERR_INVALID_ARG);
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_shared_stats(nullptr, &s), PCACHE_ERR_INVALID_ARG);
  ASSERT_EQ(h.put("k", "v"), PCACHE_OK);
  std::string got;
  ASSERT_EQ(h.get("k", &got), PCACHE_OK);
  EXPECT_EQ(shared(h).hits, 1) << "a memory: cache keeps them in the handle";
}

// A remote tier that accepts connections and never answers: one open, get and close made 41
// calls to it (each waiting out timeout_ms: 4.5 s), the closing handle chasing the tier errors its
// own flush recorded. After a timeout the tier is left alone (even with backoff_ms=0), and a close
// waits only for a busy store. Counted as connections the silent server was asked for.
TEST_F(SharedStats, ASilentRemoteCostsOneTimeoutNotOnePerCall) {
  int silent = -1;
  const int port = silent_server(SOCK_NONBLOCK, &silent);
  std::vector<int> accepted;
  auto connections = [&] {
    for (int fd; (fd = ::accept(silent, nullptr, nullptr)) >= 0;) accepted.push_back(fd);
    return accepted.size();
  };
  {
    Handle stack("tiered:sqlite:" + dir_ + "/l.db|redis://127.0.0.1:" + std::to_string(port) +
                 "/0?timeout_ms=100&backoff_ms=0");
    std::string got;
    for (int i = 0; i < 5; ++i)
      EXPECT_EQ(stack.get("k" + std::to_string(i), &got), PCACHE_NOT_FOUND);
    ASSERT_EQ(stack.put("k", "v"), PCACHE_OK) << "the local tier takes it";
  }
  EXPECT_LE(connections(), 2u) << "the silent remote was asked again after a timeout";
  for (int fd : accepted) ::close(fd);
  ::close(silent);
}
