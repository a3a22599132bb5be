// The Redis tier on loopback, each row beside a baseline measured in the same run:
//   redis get       vs a bare hiredis GET of the same bytes (what any Redis client pays)
//   tiered hit      (served by the memory tier) vs a redis hit
//   cold start      N distinct kernels on a node with an empty local cache: through a warm
//                   Redis tier vs compiling them all with NVRTC
//   compression     zstd ratio and decompression speed on real NVRTC output
// It starts its own redis-server on 127.0.0.1 (a free port), or uses PCACHE_BENCH_REDIS_PORT.
// PCACHE_BENCH_SMOKE=1 shrinks the set-up (CI runs one iteration of each as a smoke test).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <progcache/progcache.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zstd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "redis_server.hpp"

namespace {

using benchutil::smoke;
using benchutil::temp_dir;

// A redis-server for the whole run (tests/support, as the tests start theirs), or the one at
// PCACHE_BENCH_REDIS_PORT.
int server_port() {
  if (const char *p = std::getenv("PCACHE_BENCH_REDIS_PORT")) return std::atoi(p);
  static testutil::RedisServer server;
  return server.port();
}

std::string redis_uri(const std::string &prefix, const std::string &params = "") {
  return "redis://127.0.0.1:" + std::to_string(server_port()) + "/0?prefix=" + prefix + params;
}

pcache *open_cache(const std::string &uri) {
  pcache *c = nullptr;
  if (pcache_open(uri.c_str(), nullptr, &c) != PCACHE_OK) {
    std::fprintf(stderr, "open %s: %s\n", uri.c_str(), pcache_last_error());
    std::abort();
  }
  return c;
}

// Incompressible bytes: the transfer itself, not zstd, is what these rows measure.
std::string random_payload(size_t n) {
  std::mt19937_64 rng(n);
  std::string s(n, '\0');
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint64_t v = rng();
    std::memcpy(&s[i], &v, 8);
  }
  return s;
}

std::string kernels_source() {
  std::ifstream in(PCACHE_EXAMPLES_DIR "/kernels.cu");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Compiler {
  pcache *cache;
  std::string arch = "-arch=sm_90";
  int32_t target = PCACHE_TARGET_CUBIN;
  // Compiles source; returns the output bytes (empty and an error on failure).
  std::string compile(const std::string &source, benchmark::State *st = nullptr) {
    const char *options[] = {arch.c_str(), "--std=c++17"};
    const pcache_program p = benchutil::kernels_program(source, options, target);
    pcache_compiled *r = nullptr;
    std::string out;
    if (pcache_compile(cache, &p, &r) == PCACHE_OK) {
      size_t n = 0;
      const void *d = pcache_compiled_data(r, &n);
      out.assign(static_cast<const char *>(d), n);
    } else if (st) {
      st->SkipWithError(pcache_last_error());
    }
    pcache_compiled_free(r);
    return out;
  }
};

// ---- hits over loopback ------------------------------------------------------------------------

// Times pcache_get of key (stored beforehand) for the benchmark's iterations.
void time_gets(benchmark::State &st, pcache *c, const std::string &key, size_t bytes) {
  for (auto _ : st) {
    void *data;
    size_t size;
    if (pcache_get(c, key.data(), key.size(), &data, &size) != PCACHE_OK)
      st.SkipWithError(pcache_last_error());
    benchmark::DoNotOptimize(data);
    pcache_free(data);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(bytes));
}

void BM_RedisBareGet(benchmark::State &st) {
  timeval tv{5, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", server_port(), tv);
  const std::string v = random_payload(size_t(st.range(0)));
  auto *r = static_cast<redisReply *>(
      redisCommand(c, "SET bare:%lld %b", (long long)st.range(0), v.data(), v.size()));
  freeReplyObject(r);
  for (auto _ : st) {
    r = static_cast<redisReply *>(redisCommand(c, "GET bare:%lld", (long long)st.range(0)));
    if (!r || r->type != REDIS_REPLY_STRING) st.SkipWithError("bare GET failed");
    benchmark::DoNotOptimize(r->str);
    freeReplyObject(r);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
  redisFree(c);
}

void BM_RedisGet(benchmark::State &st, const char *params) {
  pcache *c = open_cache(redis_uri("bench-get:", params));
  const std::string v = random_payload(size_t(st.range(0)));
  pcache_put(c, "key", 3, v.data(), v.size());
  time_gets(st, c, "key", v.size());
  pcache_close(c);
}

// A real cubin through redis, stored compressed (the default) or not.
void BM_RedisGetCubin(benchmark::State &st, const char *params) {
  static std::string cubin = [] {
    pcache *mem = open_cache("memory:");
    Compiler compiler{mem};
    std::string out = compiler.compile(kernels_source());
    pcache_close(mem);
    return out;
  }();
  pcache *c = open_cache(redis_uri(*params ? "bench-cubin-plain:" : "bench-cubin-zstd:", params));
  pcache_put(c, "cubin", 5, cubin.data(), cubin.size());
  time_gets(st, c, "cubin", cubin.size());
  st.counters["cubin_bytes"] = double(cubin.size());
  pcache_close(c);
}

void BM_TieredHit(benchmark::State &st) {
  const std::string dir = temp_dir() + "/tiered-hit";
  std::filesystem::create_directories(dir);
  pcache *c = open_cache("tiered:memory:|sqlite:" + dir + "/c.db|" + redis_uri("bench-tier:"));
  const std::string v = random_payload(size_t(st.range(0)));
  pcache_put(c, "key", 3, v.data(), v.size());
  time_gets(st, c, "key", v.size());
  pcache_close(c);
}

// ---- cold start
// ----------------------------------------------------------------------------------

int cold_kernels() {
  return smoke() ? 2 : 8;
}

std::string variant(int i) {
  return kernels_source() + "\n// variant " + std::to_string(i) + "\n";
}

// A node starting with an empty local cache compiles N distinct kernels: with the Redis tier
// (warmed by an earlier node) or with its local cache alone (every kernel an NVRTC compile).
void BM_ColdStart(benchmark::State &st, bool with_tier) {
  const std::string prefix = "bench-cold-" + std::to_string(::getpid()) + ":";
  if (with_tier) {  // node 0 compiles everything once and shares it
    pcache *warm = open_cache(redis_uri(prefix));
    Compiler compiler{warm};
    for (int i = 0; i < cold_kernels(); ++i) compiler.compile(variant(i), &st);
    pcache_close(warm);
  }
  static int node = 0;  // a fresh node (an empty local cache) for every iteration and repetition
  for (auto _ : st) {
    st.PauseTiming();
    const std::string dir =
        temp_dir() + "/node" + std::to_string(with_tier) + "-" + std::to_string(node++);
    std::filesystem::create_directories(dir);
    const std::string local = "sqlite:" + dir + "/c.db";
    st.ResumeTiming();
    pcache *c = open_cache(with_tier ? "tiered:" + local + "|" + redis_uri(prefix) : local);
    Compiler compiler{c};
    for (int i = 0; i < cold_kernels(); ++i) compiler.compile(variant(i), &st);
    pcache_close(c);
  }
  st.counters["kernels"] = cold_kernels();
}

// ---- compression on real NVRTC output --------------------------------------------------------

struct Output {
  int32_t target;
  std::string bytes;
};

// The outputs of the example kernels for several architectures and all three targets.
const std::vector<Output> &real_outputs() {
  static std::vector<Output> outputs = [] {
    std::vector<Output> out;
    pcache *mem = open_cache("memory:");
    Compiler compiler{mem};
    std::vector<std::string> archs = {"-arch=sm_75", "-arch=sm_80", "-arch=sm_86", "-arch=sm_89",
                                      "-arch=sm_90"};
    if (smoke()) archs.resize(1);
    for (const auto &arch : archs)
      for (int32_t target : {PCACHE_TARGET_CUBIN, PCACHE_TARGET_PTX, PCACHE_TARGET_LTOIR}) {
        compiler.arch = arch;
        compiler.target = target;
        std::string o = compiler.compile(kernels_source());
        if (!o.empty()) out.push_back({target, std::move(o)});
      }
    pcache_close(mem);
    return out;
  }();
  return outputs;
}

void BM_ZstdRealOutputs(benchmark::State &st) {
  const int level = int(st.range(0));
  size_t raw[3] = {}, packed[3] = {};
  std::vector<std::string> frames;
  ZSTD_CCtx *cctx = ZSTD_createCCtx();
  for (const auto &o : real_outputs()) {
    std::string f(ZSTD_compressBound(o.bytes.size()), '\0');
    f.resize(ZSTD_compressCCtx(cctx, f.data(), f.size(), o.bytes.data(), o.bytes.size(), level));
    raw[o.target] += o.bytes.size();
    packed[o.target] += f.size();
    frames.push_back(std::move(f));
  }
  ZSTD_freeCCtx(cctx);
  std::string out(1 << 20, '\0');
  ZSTD_DCtx *dctx = ZSTD_createDCtx();  // reused, as the library does per thread
  for (auto _ : st)
    for (size_t i = 0; i < frames.size(); ++i)
      benchmark::DoNotOptimize(
          ZSTD_decompressDCtx(dctx, out.data(), out.size(), frames[i].data(), frames[i].size()));
  ZSTD_freeDCtx(dctx);
  const size_t all_raw = raw[0] + raw[1] + raw[2], all_packed = packed[0] + packed[1] + packed[2];
  st.SetBytesProcessed(int64_t(st.iterations()) * int64_t(all_raw));  // decompressed bytes
  st.counters["outputs"] = double(frames.size());
  st.counters["raw_bytes"] = double(all_raw);
  st.counters["ratio"] = double(all_raw) / double(all_packed);
  const char *names[] = {"cubin", "ptx", "ltoir"};
  for (int t = 0; t < 3; ++t)
    if (packed[t]) {
      st.counters[std::string("ratio_") + names[t]] = double(raw[t]) / double(packed[t]);
      st.counters[std::string("bytes_") + names[t]] = double(raw[t]);
    }
}

constexpr int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20};

}  // namespace

BENCHMARK(BM_RedisBareGet)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_RedisGet, plain, "&compress=none")
    ->Arg(kSizes[0])
    ->Arg(kSizes[1])
    ->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_RedisGetCubin, zstd, "");
BENCHMARK_CAPTURE(BM_RedisGetCubin, plain, "&compress=none");
BENCHMARK(BM_TieredHit)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_ColdStart, nvrtc_only, false)->Iterations(1)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_ColdStart, redis_tier, true)->Iterations(3)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ZstdRealOutputs)->Arg(1)->Arg(3)->Arg(9)->Arg(19);

BENCHMARK_MAIN();
