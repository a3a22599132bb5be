#include "redis_server.hpp"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <thread>

namespace testutil {
namespace {

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    throw std::runtime_error("cannot find a free port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string reply_text(const redisReply *r) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      return std::string(r->str, r->len);
    case REDIS_REPLY_INTEGER:
      return std::to_string(r->integer);
    case REDIS_REPLY_NIL:
      return "(nil)";
    default: {
      std::string out;
      for (size_t i = 0; i < r->elements; ++i) out += (i ? "\n" : "") + reply_text(r->element[i]);
      return out;
    }
  }
}

}  // namespace

RedisServer::RedisServer(std::vector<std::string> extra_args)
    : extra_(std::move(extra_args)), dir_(std::make_unique<TempDir>()), owner_(::getpid()) {
  // A port found free can be taken before the server binds it: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_port();
    if (launch()) return;
  }
  throw std::runtime_error(
      "redis-server did not start (is the redis-server package installed? "
      "scripts/deps installs it); log: " +
      read_file(*dir_ / "redis.log"));
}

bool RedisServer::launch() {
  std::vector<std::string> args = {
      "redis-server", "--port",    std::to_string(port_), "--bind",      "127.0.0.1",
      "--save",       "",          "--appendonly",        "no",          "--dir",
      dir_->path(),   "--logfile", *dir_ / "redis.log",   "--daemonize", "no"};
  args.insert(args.end(), extra_.begin(), extra_.end());
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // Dies with the test process, even one killed by a sanitizer or a timeout.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    std::vector<char *> argv;
    for (auto &a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp("redis-server", argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  for (int i = 0; i < 500; ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken, or no binary
      pid_ = -1;
      return false;
    }
    // A server with requirepass answers PING with NOAUTH: up all the same.
    const std::string pong = command({"PING"});
    if (pong == "PONG" || pong.compare(0, 6, "NOAUTH") == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill();
  return false;
}

RedisServer::~RedisServer() {
  if (pid_ > 0 && ::getpid() == owner_) {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
}

void RedisServer::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::start() {
  // The old socket may linger briefly; retry on the same port.
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (launch()) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw std::runtime_error("redis-server did not restart on port " + std::to_string(port_));
}

std::string RedisServer::uri(const std::string &prefix, const std::string &extra) const {
  return "redis://127.0.0.1:" + std::to_string(port_) + "/0?prefix=" + prefix + extra;
}

std::string RedisServer::command(const std::vector<std::string> &args) const {
  timeval tv{2, 0};
  redisContext *c = redisConnectWithTimeout("127.0.0.1", port_, tv);
  if (!c || c->err) {
    std::string why = c ? c->errstr : "no memory";
    redisFree(c);
    return "ERR-CONNECT " + why;
  }
  std::vector<const char *> argv;
  std::vector<size_t> lens;
  for (const auto &a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto *r =
      static_cast<redisReply *>(redisCommandArgv(c, int(args.size()), argv.data(), lens.data()));
  std::string out = r ? reply_text(r) : "ERR-IO " + std::string(c->errstr);
  if (r) freeReplyObject(r);
  redisFree(c);
  return out;
}

RedisServer &shared_redis() {
  static RedisServer server;
  return server;
}

std::string redis_prefix(const TempDir &dir) {
  return "t" + std::to_string(std::hash<std::string>{}(dir.path())) + ":";
}

}  // namespace testutil
