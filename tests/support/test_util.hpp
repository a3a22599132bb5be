// Helpers shared by the tests: temporary directories, handle RAII, self-checking values.
#pragma once

#include <progcache/progcache.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "programs.hpp"
#include "scratch.hpp"

namespace testutil {

// Owns a pcache handle.
class Handle {
 public:
  explicit Handle(const std::string &uri, uint64_t max_size_bytes = 0);
  ~Handle() { pcache_close(h_); }
  Handle(const Handle &) = delete;
  Handle &operator=(const Handle &) = delete;
  pcache *get() const { return h_; }
  operator pcache *() const { return h_; }  // NOLINT
  pcache_status put(const std::string &key, const std::string &value);
  // Returns the status; the value in *value on a hit.
  pcache_status get(const std::string &key, std::string *value);
  uint64_t count();
  uint64_t size();
  pcache_stats stats();

 private:
  pcache *h_ = nullptr;
};

// A value that describes itself: "<id>:<seed>:<len>|" then bytes derived from them. Any torn,
// mixed or foreign value fails check_value.
std::string make_value(uint32_t id, uint32_t seed, size_t len);

// Sets an environment variable for the scope, restoring the old value (or its absence) after.
class ScopedEnv {
 public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    if (const char *old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv &) = delete;
  ScopedEnv &operator=(const ScopedEnv &) = delete;

 private:
  const char *name_;
  std::optional<std::string> old_;
};
bool check_value(const std::string &value, uint32_t *id = nullptr, uint32_t *seed = nullptr);

// For a cache made read-only after storing "k": opening and hits must work, a put must fail with
// PCACHE_ERR_PERMISSION or PCACHE_ERR_IO and a message, and "k" must still be there.
// Returns 0, or the number of the first check that failed (reasons go to stderr).
int check_read_only_cache(const std::string &uri);

// examples/kernels.cu's program as the tests compile it: name "kernels.cu", -arch=sm_90
// --std=c++17, the given name expressions and target. source must outlive the result.
pcache_program kernels_program(const std::string &source, const char **exprs, size_t n,
                               int32_t target);

// Runs a shell command and returns its standard output.
std::string run_command(const std::string &cmd);
// Files (recursively) under dir whose name ends with suffix ("" = all regular files).
std::vector<std::string> list_files(const std::string &dir, const std::string &suffix = "");

}  // namespace testutil
