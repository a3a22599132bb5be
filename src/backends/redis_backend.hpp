// redis://[[USER]:PASSWORD@]HOST:PORT[/DB][?prefix=NAME&timeout_ms=N&ttl=DURATION...]: entries in
// a Redis server shared by many machines, through hiredis. One Redis string per entry (the whole
// record, under PREFIX "e:" KEY); the size cap and eviction are Redis's own (maxmemory with
// allkeys-lru); count/size/list walk the prefix with SCAN. See docs/distributed.md.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.hpp"
#include "util/uri.hpp"

struct redisContext;

namespace progcache {

class RedisBackend final : public Backend, public SharedCounters, public LeaseStore {
 public:
  // Connects once unless lazy (a tier of a tiered cache opens even while the server is down);
  // throws Error(remote) if the server cannot be reached or refuses the credentials.
  RedisBackend(Uri &uri, const BackendConfig &config, bool lazy);
  ~RedisBackend() override;

  SharedBlob get(ByteView key, Access access) override;
  void put(ByteView key, Blob &&record, uint64_t payload_size) override;
  bool remove(ByteView key) override;
  uint64_t count() override;
  uint64_t size() override;
  void clear() override;
  uint64_t max_payload_size() const override;
  void list(const std::function<void(const EntryInfo &)> &fn) override;
  void add_counters(const PersistentCounters &delta) override;
  PersistentCounters counters() override;
  void reset_counters() override;
  // Replaces a damaged counters key by an empty hash, with a warning saying what it held.
  void recreate_stats(const std::string &why);
  SharedCounters *shared_counters() override { return this; }
  LeaseStore *leases() override { return this; }
  uint64_t timeout_ms() const override { return uint64_t(timeout_ms_); }
  uint64_t retry_backoff_ms() const override { return backoff_ms_; }
  // SET PREFIX l:KEY TOKEN NX PX lease_ms; released by compare-and-delete, or expired by Redis
  // if the holder dies.
  std::optional<std::string> try_lease(ByteView key) override;
  void release_lease(ByteView key, const std::string &token) override;
  // Memos are Redis strings under PREFIX "m:" NAME, outside the entries' "e:" keyspace.
  std::optional<std::string> get_meta(std::string_view name) override;
  void put_meta(std::string_view name, ByteView record) override;

  class Connection;  // one hiredis context, leased to one call at a time

 private:
  Connection acquire();
  void release(redisContext *context);
  std::string entry_key(ByteView key) const;
  // Calls fn(batch of full Redis key names) for every entry key, SCAN batch by SCAN batch.
  void scan(const std::function<void(Connection &, const std::vector<std::string> &)> &fn);

  std::string host_;
  int port_ = 6379;
  int db_ = 0;
  std::string user_, password_;
  std::string prefix_ = "progcache:";
  uint64_t timeout_ms_ = 2000;
  uint64_t backoff_ms_ = 1000;
  int64_t ttl_seconds_ = 0;
  uint64_t lease_ms_ = 120000;  // 0: no cross-machine single flight
  std::string where_;           // "redis HOST:PORT/DB" for messages

  ForkSafeMutex mutex_{ForkSafeMutex::kInner};
  std::vector<redisContext *> idle_;  // connections of process owner_pid_
  int owner_pid_ = 0;
};

}  // namespace progcache
