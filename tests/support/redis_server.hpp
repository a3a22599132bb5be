// A real redis-server (the Debian package) started by the tests on 127.0.0.1, a random free port
// and a temporary directory, and stopped when the test process ends.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "scratch.hpp"

namespace testutil {

class RedisServer {
 public:
  // Starts redis-server with extra configuration arguments ("--maxmemory", "1mb", ...).
  explicit RedisServer(std::vector<std::string> extra_args = {});
  ~RedisServer();
  RedisServer(const RedisServer &) = delete;
  RedisServer &operator=(const RedisServer &) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // "redis://127.0.0.1:PORT/0?prefix=PREFIX" plus extra parameters ("&timeout_ms=500").
  std::string uri(const std::string &prefix, const std::string &extra = "") const;
  // SIGKILL, as a crashed or unplugged server; start() brings it back on the same port, empty.
  void kill();
  void start();
  bool running() const { return pid_ > 0; }
  // Runs one command on the server (binary-safe arguments); returns the reply as text: a
  // string's bytes, an integer in decimal, "(nil)", "OK", or "ERR..." for an error.
  std::string command(const std::vector<std::string> &args) const;

 private:
  bool launch();
  std::vector<std::string> extra_;
  std::unique_ptr<TempDir> dir_;
  int port_ = 0;
  pid_t pid_ = -1;
  pid_t owner_ = -1;
};

// One server shared by every test of this process (the contract suite), started on first use.
RedisServer &shared_redis();

// A key prefix unique to dir (so a test's entries never meet another test's, and reopening with
// the same dir finds the same entries).
std::string redis_prefix(const TempDir &dir);

}  // namespace testutil
