// progcache benchmarks. Every progcache row has a baseline measured in the same process, so that
// bench/run can report ratios that hold on a noisy machine:
//   memory get      vs memcpy of the payload
//   sqlite get/put  vs a bare prepared SELECT / INSERT OR REPLACE through SQLite's C API
//   filestream get  vs open+read+close of a file of the same size; put vs write+rename
//   key derivation  vs raw BLAKE2b over the same bytes (OpenSSL)
//   compile hit     vs compile miss (real NVRTC)
//   PTX -> cubin hit vs open+read+close of the cubin
// PCACHE_BENCH_SMOKE=1 shrinks the set-up (CI runs one iteration of each as a smoke test).
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <malloc.h>
#include <openssl/evp.h>
#include <progcache/progcache.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

using benchutil::smoke;
using benchutil::temp_dir;

struct Dir {
  std::string path;
  explicit Dir(const std::string &name) : path(temp_dir() + "/" + name) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
};

pcache *open_cache(const std::string &uri, uint64_t cap = 0) {
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.max_size_bytes = cap;
  pcache *c = nullptr;
  if (pcache_open(uri.c_str(), &o, &c) != PCACHE_OK) {
    std::fprintf(stderr, "open %s: %s\n", uri.c_str(), pcache_last_error());
    std::abort();
  }
  return c;
}

std::string payload(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(i * 131 + 7);
  return s;
}

std::string uri_for(const std::string &backend, const std::string &dir) {
  if (backend == "memory") return "memory:";
  if (backend == "sqlite") return "sqlite:" + dir + "/cache.db";
  return "filestream:" + dir + "/fs";
}

// ---- hits ------------------------------------------------------------------------------------

// The copy's floor: memcpy between two page-aligned buffers, the arrangement pcache_get gives its
// own copy of a payload of 1 KiB or more (the block placed at the source's offset in a page).
// Where two malloc'd buffers lie is chance, and this CPU copies 4 KiB ~50% slower when their
// offsets within 64 bytes differ: a baseline taken between a std::string and a std::vector
// measured 21.7 ns in one process and 30 ns in the next (bench/analysis.md, stop 54).
void BM_Memcpy(benchmark::State &st) {
  const size_t n = size_t(st.range(0));
  const size_t pages = (n + 4095) / 4096 * 4096;  // aligned_alloc's size: a multiple of 4096
  const std::string src_bytes = payload(n);
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  const std::unique_ptr<char, Free> src(static_cast<char *>(std::aligned_alloc(4096, pages)));
  const std::unique_ptr<char, Free> dst(static_cast<char *>(std::aligned_alloc(4096, pages)));
  std::memcpy(src.get(), src_bytes.data(), n);
  std::memset(dst.get(), 0, pages);
  for (auto _ : st) {
    std::memcpy(dst.get(), src.get(), n);
    benchmark::DoNotOptimize(dst.get());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void BM_Get(benchmark::State &st, const char *backend) {
  Dir d(std::string("get-") + backend);
  pcache *c = open_cache(uri_for(backend, d.path));
  const std::string v = payload(size_t(st.range(0)));
  pcache_put(c, "key", 3, v.data(), v.size());
  for (auto _ : st) {
    void *data;
    size_t size;
    if (pcache_get(c, "key", 3, &data, &size) != PCACHE_OK) st.SkipWithError("miss");
    benchmark::DoNotOptimize(data);
    pcache_free(data);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
  pcache_close(c);
}

// pcache_get_into on a memory cache: the hit's copy into the caller's reused buffer, as the
// memcpy baseline copies, where pcache_get hands out a new block for each hit.
void BM_GetInto(benchmark::State &st) {
  pcache *c = open_cache("memory:");
  const std::string v = payload(size_t(st.range(0)));
  pcache_put(c, "key", 3, v.data(), v.size());
  std::vector<char> out(v.size());
  for (auto _ : st) {
    size_t size;
    if (pcache_get_into(c, "key", 3, out.data(), out.size(), &size) != PCACHE_OK)
      st.SkipWithError("miss");
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
  pcache_close(c);
}

void BM_GetView(benchmark::State &st) {
  pcache *c = open_cache("memory:");
  const std::string v = payload(size_t(st.range(0)));
  pcache_put(c, "key", 3, v.data(), v.size());
  for (auto _ : st) {
    pcache_view view;
    pcache_get_view(c, "key", 3, &view);
    benchmark::DoNotOptimize(view.data);
    pcache_view_release(&view);
  }
  pcache_close(c);
}

void BM_SqliteBareSelect(benchmark::State &st) {
  Dir d("bare-select");
  sqlite3 *db;
  sqlite3_open((d.path + "/bare.db").c_str(), &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(k BLOB PRIMARY KEY, v BLOB)", nullptr,
               nullptr, nullptr);
  const std::string v = payload(size_t(st.range(0)));
  sqlite3_stmt *ins;
  sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2)", -1, &ins, nullptr);
  sqlite3_bind_blob(ins, 1, "key", 3, SQLITE_STATIC);
  sqlite3_bind_blob(ins, 2, v.data(), int(v.size()), SQLITE_STATIC);
  sqlite3_step(ins);
  sqlite3_finalize(ins);
  sqlite3_stmt *sel;
  sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?1", -1, &sel, nullptr);
  std::vector<char> out(v.size());
  for (auto _ : st) {
    sqlite3_bind_blob(sel, 1, "key", 3, SQLITE_STATIC);
    if (sqlite3_step(sel) != SQLITE_ROW) st.SkipWithError("no row");
    std::memcpy(out.data(), sqlite3_column_blob(sel, 0), size_t(sqlite3_column_bytes(sel, 0)));
    sqlite3_reset(sel);
    benchmark::DoNotOptimize(out.data());
  }
  sqlite3_finalize(sel);
  sqlite3_close(db);
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

// The baseline of a hit from a file: open+fstat+read+close of the whole file, each iteration.
void read_file_each_iteration(benchmark::State &st, const std::string &path) {
  std::vector<char> out(std::filesystem::file_size(path));
  for (auto _ : st) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat s;
    ::fstat(fd, &s);
    if (::read(fd, out.data(), size_t(s.st_size)) != s.st_size) st.SkipWithError("short read");
    ::close(fd);
    benchmark::DoNotOptimize(out.data());
  }
}

void BM_RawRead(benchmark::State &st) {
  Dir d("raw-read");
  const std::string path = d.path + "/file";
  std::ofstream(path, std::ios::binary) << payload(size_t(st.range(0)));
  read_file_each_iteration(st, path);
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

// ---- puts ------------------------------------------------------------------------------------

void BM_Put(benchmark::State &st, const char *backend, const char *params) {
  Dir d(std::string("put-") + backend);
  pcache *c = open_cache(uri_for(backend, d.path) + params);
  const std::string v = payload(size_t(st.range(0)));
  uint64_t i = 0;
  for (auto _ : st) {
    const uint64_t k = i++ % 1024;  // replacements of a bounded set: the store stays small
    if (pcache_put(c, &k, sizeof k, v.data(), v.size()) != PCACHE_OK)
      st.SkipWithError(pcache_last_error());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
  pcache_close(c);
}

void BM_RawWriteRename(benchmark::State &st, bool fsync) {
  Dir d("raw-write");
  const std::string v = payload(size_t(st.range(0)));
  uint64_t i = 0;
  for (auto _ : st) {
    const std::string tmp = d.path + "/tmp." + std::to_string(i);
    const std::string dst = d.path + "/e" + std::to_string(i++ % 1024);
    const int fd = ::open(tmp.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600);
    if (::write(fd, v.data(), v.size()) != ssize_t(v.size())) st.SkipWithError("write");
    if (fsync) ::fsync(fd);
    ::close(fd);
    ::rename(tmp.c_str(), dst.c_str());
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void BM_SqliteBareInsert(benchmark::State &st) {
  Dir d("bare-insert");
  sqlite3 *db;
  sqlite3_open((d.path + "/bare.db").c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE t(k BLOB PRIMARY "
               "KEY, v BLOB)",
               nullptr, nullptr, nullptr);
  const std::string v = payload(size_t(st.range(0)));
  sqlite3_stmt *ins;
  sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO t VALUES(?1, ?2)", -1, &ins, nullptr);
  uint64_t i = 0;
  for (auto _ : st) {
    const uint64_t k = i++ % 1024;
    sqlite3_bind_blob(ins, 1, &k, sizeof k, SQLITE_STATIC);
    sqlite3_bind_blob(ins, 2, v.data(), int(v.size()), SQLITE_STATIC);
    if (sqlite3_step(ins) != SQLITE_DONE) st.SkipWithError("insert");
    sqlite3_reset(ins);
  }
  sqlite3_finalize(ins);
  sqlite3_close(db);
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

// ---- misses, eviction --------------------------------------------------------------------------

void BM_Miss(benchmark::State &st, const char *backend) {
  Dir d(std::string("miss-") + backend);
  pcache *c = open_cache(uri_for(backend, d.path));
  pcache_put(c, "present", 7, "v", 1);
  for (auto _ : st) {
    void *data;
    size_t size;
    if (pcache_get(c, "absent", 6, &data, &size) != PCACHE_NOT_FOUND) st.SkipWithError("hit");
  }
  pcache_close(c);
}

// A put that evicts: the cache holds range(0) entries of 1 KiB at its cap.
void BM_EvictingPut(benchmark::State &st, const char *backend) {
  const int64_t entries = smoke() ? std::min<int64_t>(st.range(0), 1000) : st.range(0);
  Dir d(std::string("evict-") + backend);
  const size_t value_size = 1024;
  pcache *c = open_cache(uri_for(backend, d.path), uint64_t(entries) * value_size);
  const std::string v = payload(value_size);
  uint64_t i = 0;
  for (; int64_t(i) < entries; ++i) pcache_put(c, &i, sizeof i, v.data(), v.size());
  for (auto _ : st) {
    ++i;
    if (pcache_put(c, &i, sizeof i, v.data(), v.size()) != PCACHE_OK)
      st.SkipWithError(pcache_last_error());
  }
  pcache_stats s{};
  s.struct_size = sizeof s;
  pcache_get_stats(c, &s);
  st.counters["evictions_per_put"] =
      double(s.evictions) / double(st.iterations() ? st.iterations() : 1);
  pcache_close(c);
}

// ---- keys ------------------------------------------------------------------------------------

void BM_RawBlake2b(benchmark::State &st) {
  const std::string src = payload(size_t(st.range(0)));
  EVP_MD *md = EVP_MD_fetch(nullptr, "BLAKE2B-512", nullptr);
  unsigned char out[64];
  unsigned int n;
  for (auto _ : st) {
    EVP_Digest(src.data(), src.size(), out, &n, md, nullptr);
    benchmark::DoNotOptimize(out);
  }
  EVP_MD_free(md);
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void BM_MakeKey(benchmark::State &st) {
  const std::string src = payload(size_t(st.range(0)));
  const char *options[] = {"-arch=sm_90", "--std=c++17", "-DN=4"};
  const char *exprs[] = {"kernel<float>"};
  pcache_program p = testutil::make_program("k.cu", src, options, 3, exprs, 1);
  p.source_size = src.size();
  p.nvrtc_version = 13000;
  uint8_t key[PCACHE_KEY_SIZE];
  for (auto _ : st) {
    if (pcache_make_key(&p, key) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    benchmark::DoNotOptimize(key);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

// A key of a source never keyed before in this process (BM_MakeKey keys one source again and
// again, which from 16 KiB on is served by the memo of digests, src/core/digest_memo.hpp): each
// iteration writes its count into the source's first 16 bytes, so that the memo finds no copy
// and the source's BLAKE2b is computed, with the memo's fingerprint beside it.
// Keys sources not keyed before: src with its first 16 bytes changed on each key.
void key_new_sources(benchmark::State &st, std::string src) {
  const char *options[] = {"-arch=sm_90", "--std=c++17", "-DN=4"};
  const char *exprs[] = {"kernel<float>"};
  pcache_program p = testutil::make_program("k.cu", src, options, 3, exprs, 1);
  p.source = src.data();
  p.source_size = src.size();
  p.nvrtc_version = 13000;
  uint8_t key[PCACHE_KEY_SIZE];
  static uint64_t n = 0;  // across repetitions too: a repetition's sources are never an earlier's
  for (auto _ : st) {
    char count[17];
    std::snprintf(count, sizeof count, "%016llx", static_cast<unsigned long long>(++n));
    std::memcpy(src.data(), count, 16);
    if (pcache_make_key(&p, key) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    benchmark::DoNotOptimize(key);
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * st.range(0));
}

void BM_MakeKeyFirstSight(benchmark::State &st) {
  key_new_sources(st, payload(size_t(st.range(0))));
}

// The toolkit's own headers as one source, without the lines that name another header (the key
// would read those files): real C++, with its comments, macros, literals and directives.
std::string toolkit_text(size_t n) {
  static const std::string text = [] {
    std::vector<std::string> files;
    for (const auto &e : std::filesystem::recursive_directory_iterator(PCACHE_CUDA_INCLUDE_DIR))
      if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    std::string all;
    for (const std::string &f : files) {
      std::ifstream in(f, std::ios::binary);
      for (std::string line; std::getline(in, line);)
        if (line.find("include") == std::string::npos) all += line + "\n";
      if (all.size() >= (4u << 20)) break;
    }
    return all;
  }();
  return text.substr(0, n);
}

void BM_MakeKeyFirstSightHeaders(benchmark::State &st) {
  const std::string src = toolkit_text(size_t(st.range(0)));
  if (src.size() != size_t(st.range(0))) return st.SkipWithError("the toolkit's headers are short");
  key_new_sources(st, src);
}

// ---- compile ---------------------------------------------------------------------------------

std::string kernels_source() {
  std::ifstream in(PCACHE_EXAMPLES_DIR "/kernels.cu");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void BM_Compile(benchmark::State &st, bool hit) {
  Dir d(hit ? "compile-hit" : "compile-miss");
  pcache *c = open_cache("sqlite:" + d.path + "/cache.db");
  const std::string base = kernels_source();
  const char *options[] = {"-arch=sm_90", "--std=c++17"};
  uint64_t i = 0;
  auto compile = [&](const std::string &src) {
    const pcache_program p = benchutil::kernels_program(src, options);
    pcache_compiled *r = nullptr;
    if (pcache_compile(c, &p, &r) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    benchmark::DoNotOptimize(pcache_compiled_lowered_name(r, "scale_add<float>"));
    pcache_compiled_free(r);
  };
  compile(base);  // loads NVRTC and fills the cache for the hit case
  for (auto _ : st) compile(hit ? base : base + "\n// " + std::to_string(i++) + "\n");
  pcache_close(c);
}

// PTX -> cubin with nvJitLink through the cache (issue #30): a hit against open+read+close of the
// cubin it returns. The PTX is NVRTC's of the kernels above.
const std::string &kernels_ptx() {
  static const std::string ptx = [] {
    pcache *c = open_cache("memory:");
    const char *options[] = {"-arch=sm_90", "--std=c++17"};
    const std::string source = kernels_source();  // the program borrows it
    const pcache_program p = benchutil::kernels_program(source, options, PCACHE_TARGET_PTX);
    pcache_compiled *r = nullptr;
    if (pcache_compile(c, &p, &r) != PCACHE_OK) {
      std::fprintf(stderr, "PTX: %s\n", pcache_last_error());
      std::abort();
    }
    size_t size = 0;
    const void *data = pcache_compiled_data(r, &size);
    std::string text(static_cast<const char *>(data), size);
    pcache_compiled_free(r);
    pcache_close(c);
    return text;
  }();
  return ptx;
}

// One PTX -> cubin compile through c; the cubin's bytes.
std::string compile_ptx(benchmark::State &st, pcache *c) {
  static const char *options[] = {"-arch=sm_90"};
  const std::string &ptx = kernels_ptx();
  pcache_program p = testutil::make_program("kernels.ptx", ptx, options, 1);
  p.code_type = PCACHE_CODE_PTX;
  p.source_size = ptx.size();
  pcache_compiled *r = nullptr;
  std::string cubin;
  if (pcache_compile(c, &p, &r) != PCACHE_OK) {
    st.SkipWithError(pcache_last_error());
    return cubin;
  }
  size_t size = 0;
  const void *data = pcache_compiled_data(r, &size);
  cubin.assign(static_cast<const char *>(data), size);
  pcache_compiled_free(r);
  return cubin;
}

void BM_PtxHit(benchmark::State &st) {
  Dir d("ptx-hit");
  pcache *c = open_cache("sqlite:" + d.path + "/cache.db");
  (void)compile_ptx(st, c);  // the miss: nvJitLink links it and the cache stores it
  for (auto _ : st) benchmark::DoNotOptimize(compile_ptx(st, c).size());
  pcache_close(c);
}

void BM_RawReadCubin(benchmark::State &st) {
  Dir d("ptx-read");
  pcache *c = open_cache("memory:");
  const std::string path = d.path + "/kernels.cubin";
  std::ofstream(path, std::ios::binary) << compile_ptx(st, c);
  pcache_close(c);
  read_file_each_iteration(st, path);
}

// A kernel that includes CCCL and cuda_fp16.h from the toolkit with -I: its key covers the whole
// header closure (211 files with CUDA 13.0), found by the include scan and vouched for by the
// stat-keyed memo on a hit.
const char kToolkitKernel[] =
    "#include <cuda/std/type_traits>\n#include <cuda/std/cstdint>\n#include <cuda_fp16.h>\n"
    "__global__ void k(int *x) { *x = cuda::std::is_same<int, cuda::std::int32_t>::value; }\n";
const char *const kToolkitOptions[] = {"-arch=sm_90", "-I/usr/local/cuda/include/cccl",
                                       "-I/usr/local/cuda/include"};

pcache_program toolkit_program() {
  static const std::string source = kToolkitKernel;
  return testutil::make_program("toolkit.cu", source, kToolkitOptions, 3);
}

void BM_CompileHitToolkitHeaders(benchmark::State &st) {
  Dir d("compile-toolkit");
  pcache *c = open_cache("sqlite:" + d.path + "/cache.db");
  const pcache_program p = toolkit_program();
  for (int i = 0; i < 2; ++i) {  // the miss, then one hit that fills the memos
    pcache_compiled *r = nullptr;
    if (pcache_compile(c, &p, &r) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    pcache_compiled_free(r);
  }
  for (auto _ : st) {
    pcache_compiled *r = nullptr;
    if (pcache_compile(c, &p, &r) != PCACHE_OK || !pcache_compiled_from_cache(r))
      st.SkipWithError("not a hit");
    pcache_compiled_free(r);
  }
  pcache_close(c);
}

// The floor for the row above: stat() every header of the closure, then a hit of a kernel that
// includes nothing. The closure is listed by `progcache deps` (the same scan).
void BM_StatClosurePlusHeaderlessHit(benchmark::State &st) {
  Dir d("compile-floor");
  const std::string kernel = d.path + "/toolkit.cu";
  { std::ofstream(kernel) << kToolkitKernel; }
  std::string cmd = std::string(PCACHE_CLI) + " --cache memory: deps " + kernel + " --";
  for (int i = 1; i < 3; ++i) cmd += std::string(" ") + kToolkitOptions[i];
  std::vector<std::string> closure;
  if (FILE *f = ::popen(cmd.c_str(), "r")) {
    char line[4096];
    while (std::fgets(line, sizeof line, f))
      if (std::strncmp(line, "present ", 8) == 0)
        closure.emplace_back(line + 8, std::strcspn(line + 8, "\n"));
    ::pclose(f);
  }
  if (closure.empty()) st.SkipWithError("progcache deps listed no header");
  pcache *c = open_cache("sqlite:" + d.path + "/cache.db");
  const std::string base = kernels_source();
  const char *options[] = {"-arch=sm_90", "--std=c++17"};
  const pcache_program p = benchutil::kernels_program(base, options);
  pcache_compiled *r = nullptr;
  for (int i = 0; i < 2; ++i) {
    if (pcache_compile(c, &p, &r) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    pcache_compiled_free(r);
  }
  for (auto _ : st) {
    struct stat sb;
    for (const std::string &path : closure) benchmark::DoNotOptimize(::stat(path.c_str(), &sb));
    if (pcache_compile(c, &p, &r) != PCACHE_OK) st.SkipWithError(pcache_last_error());
    pcache_compiled_free(r);
  }
  st.counters["closure_files"] = double(closure.size());
  pcache_close(c);
}

// ---- concurrency, memory ---------------------------------------------------------------------

void BM_ConcurrentHits(benchmark::State &st, const char *backend) {
  static pcache *c = nullptr;
  static std::unique_ptr<Dir> dir;
  if (st.thread_index() == 0) {
    dir = std::make_unique<Dir>(std::string("conc-") + backend);
    c = open_cache(uri_for(backend, dir->path));
    const std::string v = payload(4096);
    for (uint64_t k = 0; k < 64; ++k) pcache_put(c, &k, sizeof k, v.data(), v.size());
  }
  uint64_t k = uint64_t(st.thread_index());
  for (auto _ : st) {
    void *data;
    size_t size;
    const uint64_t key = k++ % 64;
    if (pcache_get(c, &key, sizeof key, &data, &size) != PCACHE_OK) st.SkipWithError("miss");
    pcache_free(data);
  }
  st.SetItemsProcessed(int64_t(st.iterations()));
  if (st.thread_index() == 0) {  // the loop ends at a barrier: every thread has stopped
    pcache_close(c);
    c = nullptr;
    dir.reset();
  }
}

// The ceiling for the row above: bare SQLite, one connection per thread on one WAL database,
// prepared SELECTs of the same 64 entries of 4 KiB (no recency, no checks, no handle).
void BM_SqliteBareSelectThreads(benchmark::State &st) {
  static std::unique_ptr<Dir> dir;
  static std::string path;
  if (st.thread_index() == 0) {
    dir = std::make_unique<Dir>("bare-threads");
    path = dir->path + "/bare.db";
    sqlite3 *db;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(k INTEGER PRIMARY KEY, v BLOB)",
                 nullptr, nullptr, nullptr);
    const std::string v = payload(4096);
    for (int k = 0; k < 64; ++k) {
      sqlite3_stmt *ins;
      sqlite3_prepare_v2(db, "INSERT INTO t VALUES(?1, ?2)", -1, &ins, nullptr);
      sqlite3_bind_int(ins, 1, k);
      sqlite3_bind_blob(ins, 2, v.data(), int(v.size()), SQLITE_STATIC);
      sqlite3_step(ins);
      sqlite3_finalize(ins);
    }
    sqlite3_close(db);
  }
  sqlite3 *db = nullptr;
  sqlite3_stmt *sel = nullptr;
  for (auto _ : st) {
    if (!db) {  // opened inside the loop: the setup above runs before any thread starts it
      st.PauseTiming();
      sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr);
      sqlite3_busy_timeout(db, 5000);  // two first reads at once: one rebuilds the WAL index
      sqlite3_prepare_v2(db, "SELECT v FROM t WHERE k = ?1", -1, &sel, nullptr);
      st.ResumeTiming();
    }
    static thread_local int k = 0;
    sqlite3_bind_int(sel, 1, k++ % 64);
    if (sqlite3_step(sel) != SQLITE_ROW) st.SkipWithError("no row");
    const int n = sqlite3_column_bytes(sel, 0);
    void *out = std::malloc(size_t(n));
    std::memcpy(out, sqlite3_column_blob(sel, 0), size_t(n));
    benchmark::DoNotOptimize(out);
    std::free(out);
    sqlite3_reset(sel);
  }
  sqlite3_finalize(sel);
  sqlite3_close(db);
  st.SetItemsProcessed(int64_t(st.iterations()));
  if (st.thread_index() == 0) dir.reset();
}

// Bytes the allocator has handed out (resident-set sizes would include memory freed by earlier
// benchmarks and reused here).
long heap_bytes() {
  return long(mallinfo2().uordblks);
}

void BM_MemoryOverheadPerEntry(benchmark::State &st) {
  const int64_t n = smoke() ? 1000 : 100000;
  for (auto _ : st) {
    pcache *c = open_cache("memory:");
    const std::string v = payload(64);
    const long before = heap_bytes();
    for (uint64_t k = 0; k < uint64_t(n); ++k) pcache_put(c, &k, sizeof k, v.data(), v.size());
    const long after = heap_bytes();
    st.counters["bytes_per_entry_beyond_payload"] = double(after - before) / double(n) - 64.0;
    pcache_close(c);
  }
}

}  // namespace

const int64_t kSizes[] = {4 << 10, 64 << 10, 1 << 20};

BENCHMARK(BM_Memcpy)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Get, memory, "memory")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(BM_GetInto)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(BM_GetView)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(BM_SqliteBareSelect)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Get, sqlite, "sqlite")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(BM_RawRead)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Get, filestream, "filestream")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK(BM_SqliteBareInsert)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Put, sqlite, "sqlite", "")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_RawWriteRename, nofsync, false)
    ->Arg(kSizes[0])
    ->Arg(kSizes[1])
    ->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Put, filestream, "filestream", "")
    ->Arg(kSizes[0])
    ->Arg(kSizes[1])
    ->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_RawWriteRename, fsync, true)->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Put, filestream_fsync, "filestream", "?fsync=1")
    ->Arg(kSizes[0])
    ->Arg(kSizes[1])
    ->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Put, memory, "memory", "")->Arg(kSizes[0])->Arg(kSizes[1])->Arg(kSizes[2]);
BENCHMARK_CAPTURE(BM_Miss, memory, "memory");
BENCHMARK_CAPTURE(BM_Miss, sqlite, "sqlite");
BENCHMARK_CAPTURE(BM_Miss, filestream, "filestream");
BENCHMARK_CAPTURE(BM_EvictingPut, memory, "memory")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(smoke() ? 1 : 30000);
BENCHMARK_CAPTURE(BM_EvictingPut, sqlite, "sqlite")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(smoke() ? 1 : 30000);
BENCHMARK_CAPTURE(BM_EvictingPut, filestream, "filestream")
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Iterations(smoke() ? 1 : 30000);
BENCHMARK(BM_RawBlake2b)->Arg(1 << 10)->Arg(64 << 10)->Arg(1 << 20);
BENCHMARK(BM_MakeKey)->Arg(1 << 10)->Arg(64 << 10)->Arg(1 << 20);
BENCHMARK(BM_MakeKeyFirstSight)->Arg(64 << 10)->Arg(1 << 20);
BENCHMARK(BM_MakeKeyFirstSightHeaders)->Arg(64 << 10)->Arg(1 << 20);
BENCHMARK_CAPTURE(BM_Compile, miss, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Compile, hit, true)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_StatClosurePlusHeaderlessHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_PtxHit)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RawReadCubin)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CompileHitToolkitHeaders)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SqliteBareSelectThreads)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_ConcurrentHits, sqlite, "sqlite")->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_ConcurrentHits, filestream, "filestream")
    ->Threads(1)
    ->Threads(2)
    ->UseRealTime();
BENCHMARK(BM_MemoryOverheadPerEntry)->Iterations(1);

BENCHMARK_MAIN();
