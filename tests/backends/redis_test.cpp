// The Redis tier against a real redis-server: failures, recovery, a full server, trust,
// compression, two nodes sharing compiles. (The backend contract runs in contract_test.cpp.)
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "core/cache.hpp"
#include "core/compile.hpp"
#include "cuda/nvrtc.hpp"
#include "redis_server.hpp"
#include "shim.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

std::string random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto &c : s) c = static_cast<char>(rng());
  return s;
}

// Compressible like a cubin: repetitive structure with some variety.
std::string compressible(size_t n) {
  std::string s;
  while (s.size() < n) s += "ld.global.f32 %f" + std::to_string(s.size() % 97) + ", [%rd4+16];\n";
  s.resize(n);
  return s;
}

pcache_stats tier_stats(pcache *c, uint32_t tier) {
  pcache_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_tier_stats(c, tier, &s), PCACHE_OK) << pcache_last_error();
  return s;
}

struct SecretHandle {
  pcache *h = nullptr;
  SecretHandle(const std::string &uri, const std::string &secret) {
    pcache_options o;
    pcache_options_init(&o, sizeof o);
    o.secret = secret.data();
    o.secret_size = secret.size();
    EXPECT_EQ(pcache_open(uri.c_str(), &o, &h), PCACHE_OK) << pcache_last_error();
  }
  ~SecretHandle() { pcache_close(h); }
};

}  // namespace

TEST(Redis, ServerDownIsARemoteErrorAndTheHandleReconnects) {
  RedisServer server;
  TempDir d;
  Handle c(server.uri(redis_prefix(d)));
  ASSERT_EQ(c.put("k", "value"), PCACHE_OK) << pcache_last_error();
  server.kill();
  std::string got;
  EXPECT_EQ(c.get("k", &got), PCACHE_ERR_REMOTE);
  const std::string where = "redis 127.0.0.1:" + std::to_string(server.port());
  EXPECT_NE(std::string(pcache_last_error()).find(where), std::string::npos) << pcache_last_error();
  EXPECT_EQ(c.put("k2", "v"), PCACHE_ERR_REMOTE);
  uint64_t n = 0;
  EXPECT_EQ(pcache_count(c, &n), PCACHE_ERR_REMOTE);
  // Opening a plain redis cache checks the server at once.
  pcache *other = nullptr;
  EXPECT_EQ(pcache_open(server.uri("x:").c_str(), nullptr, &other), PCACHE_ERR_REMOTE);
  EXPECT_NE(std::string(pcache_last_error()).find("Connection refused"), std::string::npos)
      << pcache_last_error();
  EXPECT_EQ(other, nullptr);
  server.start();  // back, empty (no persistence configured)
  EXPECT_EQ(c.get("k", &got), PCACHE_NOT_FOUND) << pcache_last_error();
  ASSERT_EQ(c.put("k", "again"), PCACHE_OK) << pcache_last_error();
  ASSERT_EQ(c.get("k", &got), PCACHE_OK);
  EXPECT_EQ(got, "again");
}

TEST(Redis, AStalledServerTimesOutInsteadOfHanging) {
  RedisServer server;
  TempDir d;
  Handle c(server.uri(redis_prefix(d), "&timeout_ms=300"));
  ASSERT_EQ(c.put("k", "value"), PCACHE_OK);
  ::kill(server.pid(), SIGSTOP);
  EXPECT_EQ(c.get("k", nullptr), PCACHE_ERR_REMOTE);
  EXPECT_NE(std::string(pcache_last_error()).find("timeout_ms=300"), std::string::npos)
      << pcache_last_error();
  ::kill(server.pid(), SIGCONT);
  std::string got;
  ASSERT_EQ(c.get("k", &got), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(got, "value");
}

TEST(Redis, TieredStackKeepsWorkingWhileTheServerIsDownAndRecovers) {
  RedisServer server;
  TempDir d;
  const std::string prefix = redis_prefix(d);
  const std::string uri = "tiered:memory:|sqlite:" + (d / "local.db") + "|" +
                          server.uri(prefix, "&backoff_ms=200&timeout_ms=500");
  Handle c(uri);
  ASSERT_EQ(c.put("a", "alpha"), PCACHE_OK) << pcache_last_error();
  server.kill();
  // Reads and writes fail soft: served and stored by the local tiers.
  std::string got;
  ASSERT_EQ(c.get("a", &got), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(got, "alpha");
  ASSERT_EQ(c.put("b", "beta"), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::string(pcache_last_error()).find("skipped"), std::string::npos)
      << pcache_last_error();
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(c.put("k" + std::to_string(i), "v"), PCACHE_OK) << pcache_last_error();
    ASSERT_EQ(c.get("k" + std::to_string(i), nullptr), PCACHE_OK);
  }
  EXPECT_EQ(c.get("missing", nullptr), PCACHE_NOT_FOUND) << pcache_last_error();
  const pcache_stats remote = tier_stats(c, 2);
  EXPECT_GE(remote.tier_errors, 1u);
  EXPECT_GE(remote.tier_skips, 1u);  // in back-off: not even tried
  EXPECT_EQ(tier_stats(c, 0).tier_errors, 0u);
  const pcache_stats all = c.stats();
  EXPECT_EQ(all.tier_errors, remote.tier_errors);
  EXPECT_EQ(all.tier_skips, remote.tier_skips);
  pcache_stats none{};
  none.struct_size = sizeof none;
  EXPECT_EQ(pcache_get_tier_stats(c, 3, &none), PCACHE_NOT_FOUND);

  server.start();
  // After the back-off the tier is tried again and takes new entries.
  bool reached = false;
  for (int i = 0; i < 100 && !reached; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(c.put("c", "gamma"), PCACHE_OK) << pcache_last_error();
    reached = server.command({"EXISTS", prefix + "e:c"}) == "1";
  }
  EXPECT_TRUE(reached) << "the tiered cache never wrote to the restarted server";
  Handle plain(server.uri(prefix));
  ASSERT_EQ(plain.get("c", &got), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(got, "gamma");
}

TEST(Redis, TieredReadThroughCopiesARemoteHitIntoTheLocalTiers) {
  TempDir d;
  const std::string remote = shared_redis().uri(redis_prefix(d));
  {
    Handle writer(remote);
    ASSERT_EQ(writer.put("shared", compressible(50000)), PCACHE_OK);
  }
  Handle c("tiered:memory:|sqlite:" + (d / "local.db") + "|" + remote);
  std::string got;
  ASSERT_EQ(c.get("shared", &got), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(got, compressible(50000));
  EXPECT_EQ(tier_stats(c, 0).misses, 1u);
  EXPECT_EQ(tier_stats(c, 1).misses, 1u);
  EXPECT_EQ(tier_stats(c, 2).hits, 1u);
  EXPECT_EQ(tier_stats(c, 0).puts, 1u);  // copied up
  EXPECT_EQ(tier_stats(c, 1).puts, 1u);
  ASSERT_EQ(c.get("shared", &got), PCACHE_OK);
  EXPECT_EQ(tier_stats(c, 0).hits, 1u);  // now served by memory
  EXPECT_EQ(tier_stats(c, 2).hits, 1u);
  Handle local("sqlite:" + (d / "local.db"));
  ASSERT_EQ(local.get("shared", &got), PCACHE_OK);
  EXPECT_EQ(got, compressible(50000));
}

TEST(Redis, FullServerWithNoEvictionRefusesPutsAndKeepsWhatItHas) {
  RedisServer server({"--maxmemory", "2mb", "--maxmemory-policy", "noeviction"});
  TempDir d;
  Handle c(server.uri(redis_prefix(d), "&compress=none"));
  ASSERT_EQ(c.put("first", random_bytes(1000, 1)), PCACHE_OK) << pcache_last_error();
  pcache_status st = PCACHE_OK;
  int stored = 0;
  for (int i = 0; i < 100 && st == PCACHE_OK; ++i) {
    st = c.put("k" + std::to_string(i), random_bytes(100000, i));
    if (st == PCACHE_OK) ++stored;
  }
  ASSERT_EQ(st, PCACHE_ERR_REMOTE);
  EXPECT_NE(std::string(pcache_last_error()).find("OOM"), std::string::npos) << pcache_last_error();
  EXPECT_LT(stored, 100);
  std::string got;
  ASSERT_EQ(c.get("first", &got), PCACHE_OK);
  EXPECT_EQ(got, random_bytes(1000, 1));
  // A tiered stack over the full server still stores locally.
  Handle t("tiered:sqlite:" + (d / "local.db") + "|" + server.uri(redis_prefix(d)));
  ASSERT_EQ(t.put("big", random_bytes(500000, 7)), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(tier_stats(t, 1).tier_errors, 1u);
  ASSERT_EQ(t.get("big", &got), PCACHE_OK);
  EXPECT_EQ(got, random_bytes(500000, 7));
}

TEST(Redis, FullServerWithAllKeysLruEvictsTheOldestEntries) {
  RedisServer server({"--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru"});
  TempDir d;
  Handle c(server.uri(redis_prefix(d), "&compress=none"));
  for (int i = 0; i < 60; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), random_bytes(100000, i)), PCACHE_OK)
        << i << ": " << pcache_last_error();
  const uint64_t left = c.count();
  EXPECT_LT(left, 60u);
  EXPECT_GT(left, 0u);
  std::string got;
  ASSERT_EQ(c.get("k59", &got), PCACHE_OK);  // the newest survives, whole
  EXPECT_EQ(got, random_bytes(100000, 59));
  EXPECT_EQ(c.get("k0", nullptr), PCACHE_NOT_FOUND);
}

TEST(Redis, WithASecretForgedAndUnsignedRemoteEntriesAreMissesAndNeverPromoted) {
  TempDir d;
  const std::string remote = shared_redis().uri(redis_prefix(d));
  {
    Handle unsigned_writer(remote);
    ASSERT_EQ(unsigned_writer.put("unsigned", "evil"), PCACHE_OK);
    SecretHandle forger(remote, "not the fleet's secret");
    ASSERT_EQ(pcache_put(forger.h, "forged", 6, "evil", 4), PCACHE_OK);
    SecretHandle fleet(remote, "fleet secret");
    ASSERT_EQ(pcache_put(fleet.h, "good", 4, "fine", 4), PCACHE_OK);
  }
  SecretHandle c("tiered:memory:|" + remote, "fleet secret");
  EXPECT_EQ(pcache_get(c.h, "unsigned", 8, nullptr, nullptr), PCACHE_ERR_INVALID_ARG);
  void *data = nullptr;
  size_t size = 0;
  EXPECT_EQ(pcache_get(c.h, "unsigned", 8, &data, &size), PCACHE_NOT_FOUND);
  EXPECT_EQ(pcache_get(c.h, "forged", 6, &data, &size), PCACHE_NOT_FOUND);
  ASSERT_EQ(pcache_get(c.h, "good", 4, &data, &size), PCACHE_OK);
  EXPECT_EQ(std::string(static_cast<char *>(data), size), "fine");
  pcache_free(data);
  const pcache_stats memory = tier_stats(c.h, 0), redis = tier_stats(c.h, 1);
  EXPECT_EQ(redis.corrupt, 2u);
  EXPECT_EQ(memory.puts, 1u);  // only "good" was copied up
}

TEST(Redis, CompressedAndPlainEntriesAreReadByEitherKindOfHandle) {
  TempDir d;
  const std::string prefix = redis_prefix(d);
  Handle zstd(shared_redis().uri(prefix));  // compression is on by default for redis
  Handle plain(shared_redis().uri(prefix, "&compress=none"));
  const std::string value = compressible(200000);
  ASSERT_EQ(zstd.put("z", value), PCACHE_OK);
  ASSERT_EQ(plain.put("p", value), PCACHE_OK);
  const uint64_t z_stored = std::stoull(shared_redis().command({"STRLEN", prefix + "e:z"}));
  const uint64_t p_stored = std::stoull(shared_redis().command({"STRLEN", prefix + "e:p"}));
  EXPECT_LT(z_stored, value.size() / 4);
  EXPECT_GT(p_stored, value.size());
  std::string got;
  ASSERT_EQ(plain.get("z", &got), PCACHE_OK);
  EXPECT_EQ(got, value);
  ASSERT_EQ(zstd.get("p", &got), PCACHE_OK);
  EXPECT_EQ(got, value);
  EXPECT_EQ(zstd.size(), 2 * value.size());  // sizes count the caller's bytes
  // A damaged compressed entry is a miss, removed and counted.
  std::string stored = shared_redis().command({"GET", prefix + "e:z"});
  stored[stored.size() - 10] ^= 0x55;
  ASSERT_EQ(shared_redis().command({"SET", prefix + "e:z", stored}), "OK");
  EXPECT_EQ(zstd.get("z", nullptr), PCACHE_NOT_FOUND);
  EXPECT_EQ(zstd.stats().corrupt, 1u);
  EXPECT_EQ(shared_redis().command({"EXISTS", prefix + "e:z"}), "0");
}

TEST(Redis, PrefixesKeepCachesApartAndClearTouchesOnlyItsOwn) {
  TempDir d;
  Handle a(shared_redis().uri(redis_prefix(d) + "a*[x]:"));  // glob characters match literally
  Handle b(shared_redis().uri(redis_prefix(d) + "ab:"));
  ASSERT_EQ(a.put("k", "from a"), PCACHE_OK);
  ASSERT_EQ(b.put("k", "from b"), PCACHE_OK);
  ASSERT_EQ(b.put("k2", "from b"), PCACHE_OK);
  EXPECT_EQ(a.count(), 1u);
  EXPECT_EQ(b.count(), 2u);
  ASSERT_EQ(pcache_clear(a), PCACHE_OK);
  EXPECT_EQ(a.count(), 0u);
  EXPECT_EQ(b.count(), 2u);
  std::string got;
  ASSERT_EQ(b.get("k", &got), PCACHE_OK);
  EXPECT_EQ(got, "from b");
}

TEST(Redis, PasswordsAreSentAndNeverShown) {
  RedisServer server({"--requirepass", "s3cret"});
  TempDir d;
  const std::string with_password = "redis://:s3cret@127.0.0.1:" + std::to_string(server.port());
  Handle c(with_password);
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK) << pcache_last_error();
  pcache *bad = nullptr;
  const std::string wrong = "redis://:nope@127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(pcache_open(wrong.c_str(), nullptr, &bad), PCACHE_ERR_REMOTE);
  const std::string message = pcache_last_error();
  EXPECT_NE(message.find("WRONGPASS"), std::string::npos) << message;
  EXPECT_EQ(message.find("nope"), std::string::npos) << message;
  pcache *none = nullptr;
  const std::string without = "redis://127.0.0.1:" + std::to_string(server.port());
  EXPECT_EQ(pcache_open(without.c_str(), nullptr, &none), PCACHE_ERR_REMOTE);
  EXPECT_NE(std::string(pcache_last_error()).find("NOAUTH"), std::string::npos)
      << pcache_last_error();
}

TEST(Redis, AForkedChildGetsItsOwnConnections) {
  TempDir d;
  Handle c(shared_redis().uri(redis_prefix(d)));
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(c.put("k" + std::to_string(i), make_value(i, 1, 300)), PCACHE_OK);
  // Parent and child read at once through the same handle: shared sockets would cross replies.
  auto read_all = [&c] {
    int bad = 0;
    for (int round = 0; round < 20; ++round)
      for (int i = 0; i < 50; ++i) {
        std::string got;
        uint32_t id = 0;
        if (c.get("k" + std::to_string(i), &got) != PCACHE_OK || !check_value(got, &id) ||
            id != uint32_t(i))
          ++bad;
      }
    return bad;
  };
  const pid_t child = ::fork();
  if (child == 0) ::_exit(read_all() ? 1 : 0);
  const int bad = read_all();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child read wrong values";
  EXPECT_EQ(bad, 0);
}

TEST(Redis, BadUrisAreRefusedWithReasons) {
  const char *bad[] = {"redis:",
                       "redis://",
                       "redis://:6379",
                       "redis://host:99999",
                       "redis://host:12x",
                       "redis://host/abc",
                       "redis://host?timeout_ms=0",
                       "redis://host?unknown=1",
                       "redis://host?compress=lz4",
                       "redis://host?prefix=",  // its keys among every other: stats, e:...
                       "tiered:",
                       "tiered:memory:||memory:",
                       "tiered:memory:|tiered:memory:"};
  for (const char *uri : bad) {
    pcache *c = nullptr;
    EXPECT_EQ(pcache_open(uri, nullptr, &c), PCACHE_ERR_INVALID_ARG) << uri;
    EXPECT_STRNE(pcache_last_error(), "") << uri;
  }
  pcache *c = nullptr;
  EXPECT_EQ(pcache_open("rediss://host:6380", nullptr, &c), PCACHE_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(pcache_last_error()).find("TLS"), std::string::npos);
}

// Two "nodes": separate processes with separate local caches and one Redis. The second node's
// compile of the example kernel is served by Redis: zero NVRTC compiles.
TEST(Redis, SecondNodeCompilesNothing) {
  TempDir d;
  const std::string remote = shared_redis().uri(redis_prefix(d));
  const std::string env = std::string("PCACHE_NVRTC_LIBRARY=") + PCACHE_FAKE_NVRTC +
                          " PCACHE_TEST_REAL_NVRTC=" + progcache::locate_nvrtc().path;
  auto node = [&](const std::string &name) {
    return run_command(env + " PCACHE_TEST_NVRTC_COUNT=" + (d / (name + ".count")) + " " +
                       PCACHE_COMPILE_PROBE + " 'tiered:sqlite:" + (d / (name + ".db")) + "|" +
                       remote + "' " + PCACHE_EXAMPLES_DIR "/kernels.cu");
  };
  const std::string first = node("node1");
  EXPECT_NE(first.find("status=0 hit=0"), std::string::npos) << first;
  EXPECT_EQ(read_file(d / "node1.count").size(), 1u) << "node 1 compiles once";
  const std::string second = node("node2");
  EXPECT_NE(second.find("status=0 hit=1"), std::string::npos) << second;
  EXPECT_NE(second.find("lowered=_Z"), std::string::npos) << second;  // names survive the trip
  EXPECT_EQ(read_file(d / "node2.count").size(), 0u) << "node 2 made NVRTC calls: " << second;
  // The hit was copied into node 2's local cache: it now starts warm without Redis.
  Handle local("sqlite:" + (d / "node2.db"));
  EXPECT_GE(local.count(), 1u);
  // The NVRTC time node 2 saved is in the shared counters (`progcache stats` on the Redis).
  const std::string saved =
      shared_redis().command({"HGET", redis_prefix(d) + "stats", "compile_us_saved"});
  EXPECT_GT(std::atoll(saved.c_str()), 0) << saved;
}

namespace {

// The program tests/capi/compile_probe.c compiles.
pcache_program probe_program(const std::string &source) {
  static const char *exprs[] = {"scale_add<float>"};
  return kernels_program(source, exprs, 1, PCACHE_TARGET_CUBIN);
}

struct Nodes {
  TempDir d;
  std::string remote = shared_redis().uri(redis_prefix(d));
  std::string kernel = d / "kernels.cu";
  Nodes() { write_file(kernel, read_file(PCACHE_EXAMPLES_DIR "/kernels.cu")); }
  // The command line of node `name`: its own SQLite cache in front of the shared Redis.
  std::string command(const std::string &name) const {
    return std::string("PCACHE_NVRTC_LIBRARY=") + PCACHE_FAKE_NVRTC +
           " PCACHE_TEST_REAL_NVRTC=" + progcache::locate_nvrtc().path +
           " PCACHE_TEST_NVRTC_COUNT=" + (d / (name + ".count")) + " " + PCACHE_COMPILE_PROBE +
           " 'tiered:sqlite:" + (d / (name + ".db")) + "|" + remote + "' " + kernel;
  }
  size_t compiles(const std::string &name) const { return read_file(d / (name + ".count")).size(); }
  // This process compiles with the nodes' NVRTC (the build is part of the key).
  struct SameNvrtc {
    ScopedEnv real{"PCACHE_TEST_REAL_NVRTC", progcache::locate_nvrtc().path};
    ScopedEnv fake{"PCACHE_NVRTC_LIBRARY", PCACHE_FAKE_NVRTC};
  };
  // What the nodes' compiles take their lease on: the program's identity (a compile's key is
  // known only once an observation of NVRTC holds; core/compile.cpp).
  std::string lease_key() const {
    const std::string source = read_file(kernel);
    const pcache_program p = probe_program(source);
    SameNvrtc same;
    const progcache::Key k =
        progcache::prepare_compile(nullptr, progcache::shim::to_desc(&p)).identity;
    return std::string(reinterpret_cast<const char *>(k.data()), k.size());
  }
};

}  // namespace

// A fleet starting together: four nodes miss the same kernel at once, with separate local caches
// and one Redis. One compiles; the others wait for its entry (the Redis lease).
TEST(Redis, NodesMissingTogetherCompileOnceInAll) {
  Nodes nodes;
  const std::string out =
      run_command("for n in a b c d; do " + nodes.command("$n") + " & done; wait");
  size_t ok = 0, hits = 0;
  for (size_t pos = 0; (pos = out.find("status=0 ", pos)) != std::string::npos; ++pos, ++ok)
    if (out.compare(pos, 15, "status=0 hit=1 ") == 0) ++hits;
  EXPECT_EQ(ok, 4u) << out;
  EXPECT_EQ(hits, 3u) << out;
  EXPECT_EQ(nodes.compiles("a") + nodes.compiles("b") + nodes.compiles("c") + nodes.compiles("d"),
            1u)
      << out;
}

// A node that finds another machine's lease waits for that machine's entry instead of compiling.
TEST(Redis, ANodeWaitsForTheLeaseHoldersEntry) {
  Nodes nodes;
  const std::string lease = redis_prefix(nodes.d) + "l:" + nodes.lease_key();
  ASSERT_EQ(shared_redis().command({"SET", lease, "another-machine", "PX", "60000"}), "OK");
  FILE *node = ::popen(nodes.command("waiter").c_str(), "r");
  ASSERT_NE(node, nullptr);
  // The "other machine" finishes: its entry lands in Redis (this handle takes no lease).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  {
    Handle other(nodes.remote + "&lease_ms=0");
    Nodes::SameNvrtc same;
    const std::string source = read_file(nodes.kernel);
    const pcache_program p = probe_program(source);
    pcache_compiled *r = nullptr;
    ASSERT_EQ(pcache_compile(other, &p, &r), PCACHE_OK) << pcache_last_error();
    pcache_compiled_free(r);
  }
  char line[512] = "";
  const bool got = std::fgets(line, sizeof line, node) != nullptr;
  ::pclose(node);
  ASSERT_TRUE(got);
  EXPECT_NE(std::string(line).find("status=0 hit=1"), std::string::npos) << line;
  EXPECT_EQ(nodes.compiles("waiter"), 0u) << line;
  EXPECT_EQ(shared_redis().command({"GET", lease}), "another-machine");  // not its lease to drop
}

// A lease whose holder died expires, and the next node compiles.
TEST(Redis, ADeadHoldersLeaseExpiresAndANodeCompiles) {
  Nodes nodes;
  const std::string lease = redis_prefix(nodes.d) + "l:" + nodes.lease_key();
  ASSERT_EQ(shared_redis().command({"SET", lease, "dead-machine", "PX", "500"}), "OK");
  const std::string out = run_command(nodes.command("survivor"));
  EXPECT_NE(out.find("status=0 hit=0"), std::string::npos) << out;
  EXPECT_EQ(nodes.compiles("survivor"), 1u) << out;
  EXPECT_EQ(shared_redis().command({"EXISTS", lease}), "0");  // released after the compile
}

TEST(Redis, CountSizeAndListWalkEveryScanBatch) {
  TempDir d;
  Handle c(shared_redis().uri(redis_prefix(d)));
  constexpr int kEntries = 2500;  // SCAN batches of 1000: several round trips, pipelined reads
  uint64_t bytes = 0;
  for (int i = 0; i < kEntries; ++i) {
    const std::string v = make_value(i, 7, 100 + i % 50);
    bytes += v.size();
    ASSERT_EQ(c.put("k" + std::to_string(i), v), PCACHE_OK) << pcache_last_error();
  }
  // The shared counters (flushed every 1024 lookups) and compile leases live beside the entries
  // and are never counted, listed or cleared as entries.
  for (int i = 0; i < 1100; ++i) ASSERT_EQ(c.get("k0", nullptr), PCACHE_OK);
  const std::string prefix = redis_prefix(d);
  ASSERT_EQ(shared_redis().command({"EXISTS", prefix + "stats"}), "1");
  ASSERT_EQ(shared_redis().command({"SET", prefix + "l:x", "holder"}), "OK");
  EXPECT_EQ(c.count(), uint64_t(kEntries));
  EXPECT_EQ(c.size(), bytes);
  ASSERT_EQ(pcache_clear(c), PCACHE_OK);
  EXPECT_EQ(shared_redis().command({"EXISTS", prefix + "stats"}), "1");
  EXPECT_EQ(c.count(), 0u);
  EXPECT_EQ(c.size(), 0u);
}

TEST(Redis, TtlExpiresEntriesOnTheServer) {
  TempDir d;
  const std::string prefix = redis_prefix(d);
  Handle c(shared_redis().uri(prefix, "&ttl=1h"));
  ASSERT_EQ(c.put("k", "v"), PCACHE_OK);
  const long ttl = std::stol(shared_redis().command({"TTL", prefix + "e:k"}));
  EXPECT_GT(ttl, 3500);
  EXPECT_LE(ttl, 3600);
  Handle forever(shared_redis().uri(prefix));
  ASSERT_EQ(forever.put("k2", "v"), PCACHE_OK);
  EXPECT_EQ(shared_redis().command({"TTL", prefix + "e:k2"}), "-1");
}

TEST(Tiered, EachTierTakesItsOwnCap) {
  TempDir d;
  Handle c("tiered:memory:?max_size=1K|sqlite:" + (d / "big.db") + "?max_size=1M");
  for (const char *k : {"a", "b", "c"}) ASSERT_EQ(c.put(k, std::string(600, *k)), PCACHE_OK);
  const pcache_stats memory = tier_stats(c, 0);
  EXPECT_EQ(memory.evictions, 2u);  // the 1 KiB memory tier keeps only the newest
  EXPECT_EQ(tier_stats(c, 1).evictions, 0u);
  for (const char *k : {"a", "b", "c"}) {
    std::string got;
    ASSERT_EQ(c.get(k, &got), PCACHE_OK) << k;
    EXPECT_EQ(got, std::string(600, *k));
  }
  EXPECT_EQ(c.count(), 3u);  // the deepest tier's count
  // A value over one tier's cap is stored by the others.
  ASSERT_EQ(c.put("big", std::string(2000, 'x')), PCACHE_OK) << pcache_last_error();
  const std::string warning = pcache_last_error();
  EXPECT_NE(warning.find("max_size_bytes"), std::string::npos) << warning;
  EXPECT_EQ(tier_stats(c, 0).tier_errors, 1u);
  pcache *bad = nullptr;
  EXPECT_EQ(pcache_open("memory:?max_size=lots", nullptr, &bad), PCACHE_ERR_INVALID_ARG);
}

// Deletes respect a remote tier's back-off: with the server stalled, each one used to wait out
// the timeout (20 deletes took 6.4 s). Now the tier in back-off is not contacted (counted as a
// skip) and the delete reports that the entry may remain there.
TEST(Tiered, DeletesDoNotContactATierInBackOff) {
  RedisServer server;
  TempDir d;
  Handle c("tiered:memory:|" + server.uri(redis_prefix(d), "&backoff_ms=60000&timeout_ms=300"));
  ASSERT_EQ(c.put("a", "alpha"), PCACHE_OK) << pcache_last_error();
  ::kill(server.pid(), SIGSTOP);
  ASSERT_EQ(c.put("b", "beta"), PCACHE_OK);  // the remote tier fails once: back-off
  const uint64_t skips = tier_stats(c, 1).tier_skips;
  const uint64_t errors = tier_stats(c, 1).tier_errors;
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(pcache_delete(c, "a", 1), PCACHE_ERR_REMOTE);
    EXPECT_NE(std::string(pcache_last_error()).find("back-off"), std::string::npos)
        << pcache_last_error();
  }
  EXPECT_EQ(tier_stats(c, 1).tier_skips, skips + 20);
  EXPECT_EQ(tier_stats(c, 1).tier_errors, errors);  // never contacted, so never failed again
  ::kill(server.pid(), SIGCONT);
}

// One key of another type under an entry's name is damage in that key, not an outage: it used to
// put the whole Redis tier into back-off. It is removed and read as a miss.
TEST(Redis, AKeyOfTheWrongTypeIsAMissNotAnOutage) {
  TempDir d;
  const std::string prefix = redis_prefix(d);
  Handle c("tiered:memory:|" + shared_redis().uri(prefix));
  ASSERT_EQ(shared_redis().command({"HSET", prefix + "e:k", "f", "v"}), "1");
  EXPECT_EQ(c.get("k", nullptr), PCACHE_NOT_FOUND) << pcache_last_error();
  EXPECT_EQ(tier_stats(c, 1).tier_errors, 0u);
  EXPECT_EQ(shared_redis().command({"EXISTS", prefix + "e:k"}), "0");
  ASSERT_EQ(c.put("k2", "v2"), PCACHE_OK);
  std::string v;
  Handle plain(shared_redis().uri(prefix));
  EXPECT_EQ(plain.get("k2", &v), PCACHE_OK) << pcache_last_error();
}

// `progcache stats --zero` on a Redis store: the shared counters go, the entries stay.
TEST(Redis, ZeroingTheSharedCountersKeepsTheEntries) {
  RedisServer server;
  TempDir d;
  const std::string uri = server.uri(redis_prefix(d));
  {
    auto cache = progcache::Cache::open(uri, {});
    cache->put(progcache::ByteView("k", 1), progcache::ByteView("v", 1));
    ASSERT_TRUE(cache->get(progcache::ByteView("k", 1)));
    EXPECT_EQ(cache->persistent_counters().hits, 1);
    cache->zero_counters();
    EXPECT_EQ(cache->persistent_counters().hits, 0);
  }
  auto again = progcache::Cache::open(uri, {});
  EXPECT_EQ(again->persistent_counters().hits, 0);
  EXPECT_EQ(again->count(), 1u);
}

// Every shared counter survives a round trip through every store that keeps them: the stores
// serialise PersistentCounters::kFields, so a counter added there and forgotten by a store fails
// here (the file-stream store once wrote 0 for tier_timeouts).
TEST(SharedCounterStores, EveryCounterSurvivesARoundTripInEveryStore) {
  TempDir d;
  for (const std::string &uri : {"sqlite:" + (d / "c.db"), "filestream:" + (d / "fs"),
                                 shared_redis().uri(redis_prefix(d))}) {
    progcache::PersistentCounters delta;
    int64_t v = 1;
    for (const auto &field : progcache::PersistentCounters::kFields)
      delta.*field.value = v++ * 1000;
    {
      auto cache = progcache::Cache::open(uri, {});
      progcache::SharedCounters *store = cache->backend().shared_counters();
      ASSERT_NE(store, nullptr) << uri;
      store->add_counters(delta);
      store->add_counters(delta);
    }
    auto again = progcache::Cache::open(uri, {});
    const progcache::PersistentCounters back = again->backend().shared_counters()->counters();
    for (const auto &field : progcache::PersistentCounters::kFields)
      EXPECT_EQ(back.*field.value, 2 * (delta.*field.value)) << uri << ": " << field.name;
  }
}

// Counters added after 0.4's eight (healed, since 0.5) live in the file-stream stats file's block
// for later counters, which needs no change when one is added: a file without the block (0.4's
// 15 words) reads them as zero and keeps the rest; a damaged block costs only them.
TEST(SharedCounterStores, FileStreamCountersAddedLaterHaveABlockOfTheirOwn) {
  TempDir d;
  const std::string fs = d / "fs", uri = "filestream:" + fs;
  progcache::PersistentCounters delta;
  delta.hits = 7;
  delta.uncacheable = 5;
  delta.healed = 3;
  auto counters = [&] {
    return progcache::Cache::open(uri, {})->backend().shared_counters()->counters();
  };
  progcache::Cache::open(uri, {})->backend().shared_counters()->add_counters(delta);
  const std::string stats = read_file(fs + "/stats");
  ASSERT_EQ(stats.size(), 37u * 8);
  EXPECT_EQ(counters().healed, 3);
  write_file(fs + "/stats", stats.substr(0, 15 * 8));  // as 0.4 wrote it
  progcache::PersistentCounters c = counters();
  EXPECT_EQ(c.hits, 7);
  EXPECT_EQ(c.uncacheable, 5);
  EXPECT_EQ(c.healed, 0);
  std::string damaged = stats;
  damaged[20 * 8] ^= 1;  // healed's word, under the later block's checksum
  write_file(fs + "/stats", damaged);
  c = counters();
  EXPECT_EQ(c.uncacheable, 5);
  EXPECT_EQ(c.healed, 0) << "a block that fails its check is not believed";
}

// A value of another type where the shared counters' hash belongs (a string, here) made every
// counter update fail with WRONGTYPE for good. It is replaced by a fresh hash, with a warning;
// gets and puts never fail for it.
TEST(Redis, ACountersKeyOfTheWrongTypeIsRecreated) {
  TempDir d;
  const std::string prefix = redis_prefix(d);
  ASSERT_EQ(shared_redis().command({"SET", prefix + "stats", "not a hash"}), "OK");
  {
    Handle c(shared_redis().uri(prefix));
    ASSERT_EQ(c.put("k", "v"), PCACHE_OK) << pcache_last_error();
    std::string got;
    ASSERT_EQ(c.get("k", &got), PCACHE_OK) << pcache_last_error();
    pcache_shared_stats s{};
    s.struct_size = sizeof s;
    ASSERT_EQ(pcache_get_shared_stats(c, &s), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(s.hits, 1) << "the hit was counted in the recreated hash";
  }
  EXPECT_EQ(shared_redis().command({"TYPE", prefix + "stats"}), "hash");
  // Damaged again while a handle is open: its statistics still read, and recover.
  Handle c(shared_redis().uri(prefix));
  ASSERT_EQ(shared_redis().command({"DEL", prefix + "stats"}), "1");
  ASSERT_EQ(shared_redis().command({"RPUSH", prefix + "stats", "x"}), "1");
  pcache_shared_stats s{};
  s.struct_size = sizeof s;
  ASSERT_EQ(pcache_get_shared_stats(c, &s), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::string(pcache_last_error()).find("recreated"), std::string::npos)
      << pcache_last_error();
  std::string got;
  EXPECT_EQ(c.get("k", &got), PCACHE_OK);
}
