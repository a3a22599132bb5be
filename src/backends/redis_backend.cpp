#include "backends/redis_backend.hpp"

#include <hiredis/hiredis.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <random>
#include <unordered_set>
#include <utility>

#include "format/entry.hpp"
#include "util/error.hpp"
#include "util/system_library.hpp"
#include "util/trust.hpp"

namespace progcache {
namespace {

// Redis refuses bulk strings over proto-max-bulk-len (512 MiB by default); the record adds the
// header, the key (at most 64 KiB) and the metadata to the payload.
constexpr uint64_t kMaxRecord = 512ull << 20;
constexpr uint64_t kRecordOverhead = 1ull << 20;
constexpr size_t kMaxIdle = 16;
constexpr const char *kScanBatch = "1000";

// libhiredis, opened by the first Redis handle (util/system_library): a process that uses no
// Redis never maps it. The members are named as the functions they hold.
// clang-format off
#define PCACHE_HIREDIS_FUNCTIONS(X) \
  X(redisConnectWithTimeout) \
  X(redisSetTimeout) \
  X(redisEnableKeepAlive) \
  X(redisFree) \
  X(redisAppendCommandArgv) \
  X(redisGetReply) \
  X(freeReplyObject)
// clang-format on
PCACHE_SYSTEM_LIBRARY_API(HiredisApi, hiredis, PCACHE_HIREDIS_SONAME, Binding::process_scope,
                          PCACHE_HIREDIS_FUNCTIONS)

using Reply = std::unique_ptr<redisReply, decltype(&freeReplyObject)>;

timeval to_timeval(uint64_t ms) {
  timeval tv;
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string percent_decode(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex_digit(s[i + 1]) >= 0 && hex_digit(s[i + 2]) >= 0) {
      out += static_cast<char>(hex_digit(s[i + 1]) * 16 + hex_digit(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// SCAN MATCH takes a glob: the prefix is matched literally.
std::string glob_escape(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

uint64_t reply_uint(const redisReply *r) {
  if (r->type == REDIS_REPLY_INTEGER) return r->integer < 0 ? 0 : uint64_t(r->integer);
  if (r->type == REDIS_REPLY_STRING) return std::strtoull(r->str, nullptr, 10);
  return 0;
}

}  // namespace

// A leased connection: returned to the pool when the call ends, dropped if it broke (hiredis
// contexts are unusable after an I/O or protocol error; the next call connects afresh).
class RedisBackend::Connection {
 public:
  Connection(RedisBackend *owner, redisContext *c) : owner_(owner), c_(c) {}
  Connection(Connection &&o) noexcept
      : owner_(o.owner_), c_(std::exchange(o.c_, nullptr)), pending_(o.pending_) {}
  Connection(const Connection &) = delete;
  Connection &operator=(const Connection &) = delete;
  Connection &operator=(Connection &&) = delete;
  ~Connection() {
    if (!c_) return;
    if (pending_ == 0)
      owner_->release(c_);
    else
      hiredis().redisFree(c_);  // replies still in flight would answer the next caller's commands
  }

  // Sends one command and reads its reply. Throws Error(remote) for a server error reply or a
  // broken connection.
  Reply command(std::initializer_list<ByteView> args) {
    append(args);
    return reply();
  }
  // Pipelining: append several commands, then read their replies in order.
  void append(std::initializer_list<ByteView> args) {
    const char *argv[8];
    size_t lens[8];
    int n = 0;
    for (const ByteView &a : args) {
      argv[n] =
          reinterpret_cast<const char *>(a.data ? a.data : reinterpret_cast<const uint8_t *>(""));
      lens[n++] = a.size;
    }
    ++pending_;
    if (hiredis().redisAppendCommandArgv(c_, n, argv, lens) != REDIS_OK) broken();
  }
  Reply reply() {
    void *raw = nullptr;
    if (hiredis().redisGetReply(c_, &raw) != REDIS_OK || !raw) broken();
    --pending_;
    Reply r(static_cast<redisReply *>(raw), hiredis().freeReplyObject);
    if (r->type == REDIS_REPLY_ERROR)
      throw Error(Status::remote, owner_->where_ + ": " + std::string(r->str, r->len));
    return r;
  }

 private:
  [[noreturn]] void broken() {
    std::string why = c_->errstr;
    const int err = errno;
    ErrorDetail detail = c_->err == REDIS_ERR_IO ? detail_from_errno(err) : ErrorDetail{};
    if (c_->err == REDIS_ERR_IO && (err == EAGAIN || err == EWOULDBLOCK)) {
      why = "no answer within timeout_ms=" + std::to_string(owner_->timeout_ms_);
      detail.cause = Cause::timeout;
    } else if (c_->err == REDIS_ERR_EOF) {
      why = "server closed the connection";
      detail.cause = Cause::connection;
    }
    hiredis().redisFree(std::exchange(c_, nullptr));
    throw Error(Status::remote, owner_->where_ + ": " + why, detail);
  }
  friend class RedisBackend;
  RedisBackend *owner_;
  redisContext *c_;
  int pending_ = 0;  // commands sent whose replies were not read yet
};

RedisBackend::RedisBackend(Uri &uri, const BackendConfig &, bool lazy) {
  // path: //[[USER]:PASSWORD@]HOST[:PORT][/DB]
  std::string rest = uri.path.substr(2);
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    const std::string userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = userinfo.find(':');
    if (colon == std::string::npos) {
      password_ = percent_decode(userinfo);
    } else {
      user_ = percent_decode(userinfo.substr(0, colon));
      password_ = percent_decode(userinfo.substr(colon + 1));
    }
  }
  if (password_.empty())
    if (const char *p = trusted_env("PCACHE_REDIS_PASSWORD")) password_ = p;
  std::string hostport = rest;
  if (const size_t slash = rest.find('/'); slash != std::string::npos) {
    hostport = rest.substr(0, slash);
    const std::string db = rest.substr(slash + 1);
    if (!db.empty()) {
      const uint64_t n = parse_uint_param("database", db);
      if (n > 1000000) throw Error(Status::invalid_arg, "redis: database number " + db);
      db_ = int(n);
    }
  }
  if (!hostport.empty() && hostport[0] == '[') {  // [IPv6]:PORT
    const size_t close = hostport.find(']');
    if (close == std::string::npos)
      throw Error(Status::invalid_arg, "redis: unterminated '[' in host '" + hostport + "'");
    host_ = hostport.substr(1, close - 1);
    hostport = hostport.substr(close + 1);
    if (!hostport.empty() && hostport[0] != ':')
      throw Error(Status::invalid_arg, "redis: unexpected text after ']' in URI");
    if (!hostport.empty()) hostport = hostport.substr(1);
    if (!hostport.empty()) port_ = int(parse_uint_param("port", hostport));
  } else {
    const size_t colon = hostport.rfind(':');
    host_ = hostport.substr(0, colon);
    if (colon != std::string::npos)
      port_ = int(parse_uint_param("port", hostport.substr(colon + 1)));
  }
  if (host_.empty()) throw Error(Status::invalid_arg, "redis: URI has no host");
  if (port_ <= 0 || port_ > 65535)
    throw Error(Status::invalid_arg, "redis: port " + std::to_string(port_) + " out of range");
  prefix_ = uri.take("prefix", prefix_);
  if (prefix_.empty())  // its "stats" (deleted when not a hash), "e:..." and "m:..." keys
    throw Error(Status::invalid_arg,
                "redis: prefix= is empty: the cache's keys (stats, e:..., m:...) would mix with "
                "every other key in the database, and a clear or a repair would delete theirs; "
                "name it (the default is progcache:)");
  timeout_ms_ = parse_uint_param("timeout_ms", uri.take("timeout_ms", "2000"));
  if (timeout_ms_ == 0) throw Error(Status::invalid_arg, "redis: timeout_ms must be > 0");
  backoff_ms_ = parse_uint_param("backoff_ms", uri.take("backoff_ms", "1000"));
  lease_ms_ = parse_uint_param("lease_ms", uri.take("lease_ms", "120000"));
  if (std::string ttl = uri.take("ttl"); !ttl.empty())
    ttl_seconds_ = parse_duration_seconds("redis ttl", ttl);
  uri.expect_no_params();
  where_ = "redis " + host_ + ":" + std::to_string(port_) + "/" + std::to_string(db_);
  owner_pid_ = int(process_id());
  if (!lazy) {
    try {
      acquire().command({std::string_view("PING")});
    } catch (...) {
      // The destructor will not run: free the connection the failed PING went back into.
      for (redisContext *c : idle_) hiredis().redisFree(c);
      idle_.clear();
      throw;
    }
  }
}

RedisBackend::~RedisBackend() {
  for (redisContext *c : idle_) hiredis().redisFree(c);
}

RedisBackend::Connection RedisBackend::acquire() {
  {
    std::lock_guard lock(mutex_);
    if (owner_pid_ != int(process_id())) {
      // A forked child must not talk over its parent's sockets: both would read each other's
      // replies. Closing our copies of the descriptors leaves the parent's connections intact.
      for (redisContext *c : idle_) hiredis().redisFree(c);
      idle_.clear();
      owner_pid_ = int(process_id());
    }
    if (!idle_.empty()) {
      redisContext *c = idle_.back();
      idle_.pop_back();
      return Connection(this, c);
    }
  }
  redisContext *c =
      hiredis().redisConnectWithTimeout(host_.c_str(), port_, to_timeval(timeout_ms_));
  if (!c) throw std::bad_alloc();
  if (c->err) {
    std::string why = c->errstr;
    const int err = errno;
    ErrorDetail detail = c->err == REDIS_ERR_IO ? detail_from_errno(err) : ErrorDetail{};
    if (c->err == REDIS_ERR_IO && (err == EINPROGRESS || err == ETIMEDOUT || err == EAGAIN)) {
      why = "cannot connect within timeout_ms=" + std::to_string(timeout_ms_);
      detail.cause = Cause::timeout;
    } else if (detail.cause == Cause::none) {
      detail.cause = Cause::connection;  // refused, unreachable, a name that does not resolve
    }
    hiredis().redisFree(c);
    throw Error(Status::remote, where_ + ": " + why, detail);
  }
  hiredis().redisSetTimeout(c, to_timeval(timeout_ms_));
  hiredis().redisEnableKeepAlive(c);
  Connection conn(this, c);
  try {
    if (!password_.empty()) {
      if (user_.empty())
        conn.command({std::string_view("AUTH"), password_});
      else
        conn.command({std::string_view("AUTH"), user_, password_});
    }
    if (db_ != 0) conn.command({std::string_view("SELECT"), std::to_string(db_)});
  } catch (...) {
    // Never pool a connection that is not logged in or not on the right database.
    if (conn.c_) hiredis().redisFree(std::exchange(conn.c_, nullptr));
    throw;
  }
  return conn;
}

void RedisBackend::release(redisContext *c) {
  std::lock_guard lock(mutex_);
  if (owner_pid_ == int(process_id()) && idle_.size() < kMaxIdle && c->err == 0)
    idle_.push_back(c);
  else
    hiredis().redisFree(c);
}

std::string RedisBackend::entry_key(ByteView key) const {
  std::string k = prefix_ + "e:";
  k.append(key.str());
  return k;
}

SharedBlob RedisBackend::get(ByteView key, Access) {
  Connection c = acquire();
  Reply r(nullptr, hiredis().freeReplyObject);
  try {
    r = c.command({std::string_view("GET"), entry_key(key)});
  } catch (const Error &e) {
    // A value of another type under an entry's name is damage in one key, not an outage of
    // the server (which would put a whole tier into back-off): removed, and a miss.
    if (std::string_view(e.what()).find("WRONGTYPE") == std::string_view::npos) throw;
    c.command({std::string_view("DEL"), entry_key(key)});
    return nullptr;
  }
  if (r->type != REDIS_REPLY_STRING) return nullptr;
  // Take the reply's own buffer (malloc'd by hiredis, freed by freeReplyObject otherwise) rather
  // than copying it: a megabyte copy and a fresh allocation cost more than the transfer.
  Blob record = Blob::adopt(reinterpret_cast<uint8_t *>(r->str), size_t(r->len));
  r->str = nullptr;
  r->len = 0;
  return std::make_shared<const Blob>(std::move(record));
}

void RedisBackend::put(ByteView key, Blob &&record, uint64_t) {
  Connection c = acquire();
  if (ttl_seconds_ > 0)
    c.command({std::string_view("SET"), entry_key(key), record.view(), std::string_view("EX"),
               std::to_string(ttl_seconds_)});
  else
    c.command({std::string_view("SET"), entry_key(key), record.view()});
}

std::optional<std::string> RedisBackend::get_meta(std::string_view name) {
  Connection c = acquire();
  Reply r = c.command({std::string_view("GET"), prefix_ + "m:" + std::string(name)});
  if (r->type != REDIS_REPLY_STRING) return std::nullopt;
  return std::string(r->str, size_t(r->len));
}

void RedisBackend::put_meta(std::string_view name, ByteView record) {
  Connection c = acquire();
  c.command({std::string_view("SET"), prefix_ + "m:" + std::string(name), record.str()});
}

bool RedisBackend::remove(ByteView key) {
  Connection c = acquire();
  return reply_uint(c.command({std::string_view("DEL"), entry_key(key)}).get()) > 0;
}

void RedisBackend::scan(
    const std::function<void(Connection &, const std::vector<std::string> &)> &fn) {
  Connection c = acquire();
  const std::string pattern = glob_escape(prefix_ + "e:") + "*";
  std::string cursor = "0";
  std::vector<std::string> batch;
  do {
    Reply r = c.command({std::string_view("SCAN"), cursor, std::string_view("MATCH"), pattern,
                         std::string_view("COUNT"), std::string_view(kScanBatch)});
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY)
      throw Error(Status::remote, where_ + ": unexpected reply to SCAN");
    cursor.assign(r->element[0]->str, r->element[0]->len);
    batch.clear();
    for (size_t i = 0; i < r->element[1]->elements; ++i) {
      const redisReply *k = r->element[1]->element[i];
      if (k->type == REDIS_REPLY_STRING) batch.emplace_back(k->str, k->len);
    }
    if (!batch.empty()) fn(c, batch);
  } while (cursor != "0");
}

uint64_t RedisBackend::count() {
  // SCAN may return a key twice when the keyspace is resized mid-walk: count distinct names.
  std::unordered_set<std::string> seen;
  scan([&](Connection &, const std::vector<std::string> &keys) {
    seen.insert(keys.begin(), keys.end());
  });
  return seen.size();
}

uint64_t RedisBackend::size() {
  uint64_t total = 0;
  list([&](const EntryInfo &e) { total += e.payload_size; });
  return total;
}

void RedisBackend::list(const std::function<void(const EntryInfo &)> &fn) {
  std::unordered_set<std::string> seen;
  const size_t skip = prefix_.size() + 2;
  const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  scan([&](Connection &c, const std::vector<std::string> &keys) {
    // OBJECT IDLETIME first: it does not touch the entry, while GETRANGE (the header, for the
    // payload size) does.
    for (const std::string &k : keys) {
      c.append({std::string_view("OBJECT"), std::string_view("IDLETIME"), k});
      c.append({std::string_view("GETRANGE"), k, std::string_view("0"),
                std::to_string(kEntryHeaderSize - 1)});
    }
    std::vector<std::pair<Reply, Reply>> replies;
    for (size_t i = 0; i < keys.size(); ++i) {
      // A key evicted or deleted between SCAN and here answers an error or nil: skip it.
      Reply idle(nullptr, hiredis().freeReplyObject), header(nullptr, hiredis().freeReplyObject);
      try {
        idle = c.reply();
      } catch (const Error &) {
        if (!c.c_) throw;
      }
      try {
        header = c.reply();
      } catch (const Error &) {
        if (!c.c_) throw;
      }
      replies.emplace_back(std::move(idle), std::move(header));
    }
    for (size_t i = 0; i < keys.size(); ++i) {
      const auto &[idle, header] = replies[i];
      if (!header || header->type != REDIS_REPLY_STRING) continue;
      const auto payload = entry_payload_size(ByteView(header->str, header->len));
      if (!payload || !seen.insert(keys[i]).second) continue;
      EntryInfo info;
      info.key = keys[i].substr(skip);
      info.payload_size = *payload;
      info.last_use = idle ? now - int64_t(reply_uint(idle.get())) : now;
      fn(info);
    }
  });
}

void RedisBackend::clear() {
  scan([&](Connection &c, const std::vector<std::string> &keys) {
    for (const std::string &k : keys) c.append({std::string_view("UNLINK"), k});
    for (size_t i = 0; i < keys.size(); ++i) c.reply();
  });
}

std::optional<std::string> RedisBackend::try_lease(ByteView key) {
  if (lease_ms_ == 0) return std::nullopt;
  // Unique per holder: only the holder's release may delete the lease, never a later holder's.
  thread_local std::mt19937_64 rng(std::random_device{}() ^ uint64_t(::getpid()) << 32);
  char token[40];
  std::snprintf(token, sizeof token, "%d-%016llx", int(::getpid()), (unsigned long long)rng());
  std::string lease_key = prefix_ + "l:";
  lease_key.append(key.str());
  Connection c = acquire();
  Reply r = c.command({std::string_view("SET"), lease_key, std::string_view(token),
                       std::string_view("NX"), std::string_view("PX"), std::to_string(lease_ms_)});
  return r->type == REDIS_REPLY_STATUS ? std::string(token) : std::string();
}

void RedisBackend::release_lease(ByteView key, const std::string &token) {
  // Compare and delete in one step, so that a lease that expired and was taken by another
  // machine is left alone.
  static constexpr std::string_view kRelease =
      "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end "
      "return 0";
  std::string lease_key = prefix_ + "l:";
  lease_key.append(key.str());
  Connection c = acquire();
  c.command({std::string_view("EVAL"), kRelease, std::string_view("1"), lease_key, token});
}

uint64_t RedisBackend::max_payload_size() const {
  return kMaxRecord - kRecordOverhead;
}

namespace {

bool wrong_type(const Error &e) {
  return std::string_view(e.what()).find("WRONGTYPE") != std::string_view::npos;
}

}  // namespace

void RedisBackend::recreate_stats(const std::string &why) {
  Connection c = acquire();
  c.command({std::string_view("DEL"), prefix_ + "stats"});
  set_thread_warning(where_ + ": the shared counters (" + prefix_ + "stats) held " + why +
                     "; recreated from zero");
}

void RedisBackend::add_counters(const PersistentCounters &d) {
  for (int attempt = 0;; ++attempt) {
    try {
      Connection c = acquire();
      const std::string stats = prefix_ + "stats";
      int sent = 0;
      for (const auto &field : PersistentCounters::kFields)
        if (const int64_t value = d.*field.value) {
          c.append({std::string_view("HINCRBY"), stats, std::string_view(field.name),
                    std::to_string(value)});
          ++sent;
        }
      // Every reply is read, whatever one of them says, so the connection goes back in step.
      std::optional<Error> failed;
      for (int i = 0; i < sent; ++i) {
        try {
          c.reply();
        } catch (const Error &e) {
          if (!failed) failed = e;
          if (!c.c_) throw;  // the connection broke: nothing more to read
        }
      }
      if (failed) throw *failed;
      return;
    } catch (const Error &e) {
      // A key of another type (a string, a list) where the counters' hash belongs made every
      // update fail for good: the key is damage, replaced by a fresh hash once.
      if (attempt > 0 || !wrong_type(e)) throw;
      recreate_stats("a value of another type");
    }
  }
}

PersistentCounters RedisBackend::counters() {
  Connection c = acquire();
  Reply r(nullptr, hiredis().freeReplyObject);
  try {
    r = c.command({std::string_view("HGETALL"), prefix_ + "stats"});
  } catch (const Error &e) {
    if (!wrong_type(e)) throw;
    recreate_stats("a value of another type");
    return {};
  }
  PersistentCounters out;
  if (r->type != REDIS_REPLY_ARRAY) return out;
  for (size_t i = 0; i + 1 < r->elements; i += 2) {
    const std::string name(r->element[i]->str, r->element[i]->len);
    const int64_t v = int64_t(reply_uint(r->element[i + 1]));
    for (const auto &field : PersistentCounters::kFields)
      if (name == field.name) out.*field.value = v;
  }
  return out;
}

void RedisBackend::reset_counters() {
  Connection c = acquire();
  c.command({std::string_view("DEL"), prefix_ + "stats"});
}

}  // namespace progcache
