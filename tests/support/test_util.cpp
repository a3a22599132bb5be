#include "test_util.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace fs = std::filesystem;

namespace testutil {

Handle::Handle(const std::string &uri, uint64_t max_size_bytes) {
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.max_size_bytes = max_size_bytes;
  const pcache_status st = pcache_open(uri.c_str(), &o, &h_);
  if (st != PCACHE_OK)
    ADD_FAILURE() << "pcache_open(" << uri << "): " << pcache_status_string(st) << ": "
                  << pcache_last_error();
}

pcache_status Handle::put(const std::string &key, const std::string &value) {
  return pcache_put(h_, key.data(), key.size(), value.data(), value.size());
}

pcache_status Handle::get(const std::string &key, std::string *value) {
  void *data = nullptr;
  size_t size = 0;
  const pcache_status st = pcache_get(h_, key.data(), key.size(), &data, &size);
  if (st == PCACHE_OK && value) value->assign(static_cast<char *>(data), size);
  pcache_free(data);
  return st;
}

uint64_t Handle::count() {
  uint64_t n = 0;
  EXPECT_EQ(pcache_count(h_, &n), PCACHE_OK) << pcache_last_error();
  return n;
}

uint64_t Handle::size() {
  uint64_t n = 0;
  EXPECT_EQ(pcache_size(h_, &n), PCACHE_OK) << pcache_last_error();
  return n;
}

pcache_stats Handle::stats() {
  pcache_stats s{};
  s.struct_size = sizeof s;
  EXPECT_EQ(pcache_get_stats(h_, &s), PCACHE_OK);
  return s;
}

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

std::string make_value(uint32_t id, uint32_t seed, size_t len) {
  std::string v = std::to_string(id) + ":" + std::to_string(seed) + ":" + std::to_string(len) + "|";
  uint64_t state = (uint64_t(id) << 32) | seed;
  while (v.size() < len) {
    state = mix(state + 0x9e3779b97f4a7c15ull);
    v.push_back(static_cast<char>(state));
  }
  return v;
}

bool check_value(const std::string &value, uint32_t *id, uint32_t *seed) {
  unsigned long i = 0, s = 0, len = 0;
  if (std::sscanf(value.c_str(), "%lu:%lu:%lu|", &i, &s, &len) != 3) return false;
  if (make_value(uint32_t(i), uint32_t(s), len) != value) return false;
  if (id) *id = uint32_t(i);
  if (seed) *seed = uint32_t(s);
  return true;
}

int check_read_only_cache(const std::string &uri) {
  pcache *h = nullptr;
  if (pcache_open(uri.c_str(), nullptr, &h) != PCACHE_OK) {
    std::fprintf(stderr, "open: %s\n", pcache_last_error());
    return 2;
  }
  void *data = nullptr;
  size_t size = 0;
  if (pcache_get(h, "k", 1, &data, &size) != PCACHE_OK) {
    std::fprintf(stderr, "get: %s\n", pcache_last_error());
    return 3;
  }
  pcache_free(data);
  const pcache_status st = pcache_put(h, "n", 1, "v", 1);
  if (st != PCACHE_ERR_PERMISSION && st != PCACHE_ERR_IO) return 4;
  if (std::strlen(pcache_last_error()) == 0) return 5;
  if (pcache_get(h, "k", 1, &data, &size) != PCACHE_OK) return 6;  // nothing lost
  pcache_free(data);
  pcache_close(h);
  return 0;
}

pcache_program kernels_program(const std::string &source, const char **exprs, size_t n,
                               int32_t target) {
  static const char *options[] = {"-arch=sm_90", "--std=c++17"};
  return make_program("kernels.cu", source, options, 2, exprs, n, target);
}

std::string run_command(const std::string &cmd) {
  std::string out;
  FILE *p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (p) ::pclose(p);
  return out;
}

std::vector<std::string> list_files(const std::string &dir, const std::string &suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    const std::string p = it->path().string();
    if (it->is_regular_file(ec) && p.size() >= suffix.size() &&
        p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(p);
  }
  return out;
}

}  // namespace testutil

#include <grp.h>
#include <sys/stat.h>

#include "proc_util.hpp"

namespace testutil {

int run_unprivileged(const std::function<int()> &fn) {
  return wait_for(spawn([&] {
    if (::geteuid() == 0) {
      ::setgroups(0, nullptr);
      if (::setgid(65534) != 0 || ::setuid(65534) != 0) return 98;
    }
    return fn();
  }));
}

}  // namespace testutil
