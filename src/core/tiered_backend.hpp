// tiered:URI|URI|...: a stack of caches, fastest first. get reads through (a hit in a lower tier
// is copied into every tier above it); put writes every tier. A tier that fails is skipped for
// that call and counted; a remote tier that fails is left alone for a back-off period, so the
// stack keeps serving from the tiers that work and a compile never fails because the shared
// cache is down. See docs/distributed.md.
//
// Each tier is a whole Cache: it checks, signs, compresses and counts its own entries, so a
// record from a remote tier is verified (checksum, MAC) before it is copied into a local one.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "backends/backend.hpp"
#include "core/cache.hpp"
#include "util/error.hpp"

namespace progcache {

class TieredBackend final : public Backend, public SharedCounters, public LeaseStore {
 public:
  TieredBackend(std::vector<std::unique_ptr<Cache>> tiers, const BackendConfig &config);

  // A use copies a hit up into the tiers above the one that had it; a peek copies nothing.
  SharedBlob get(ByteView key, Access access) override;
  void put(ByteView key, Blob &&record, uint64_t payload_size) override;
  // remove acts on every tier not in back-off, clear on every tier; both throw the first failure
  // (a tier in back-off counts as one) after trying them all: an entry that stays in a tier
  // that could not be reached would come back.
  bool remove(ByteView key) override;
  void clear() override;
  // count and size are those of the deepest tier that answers (it holds what the others hold,
  // unless its own cap evicted more).
  uint64_t count() override;
  uint64_t size() override;
  // Every entry of every tier that answers, once.
  void list(const std::function<void(const EntryInfo &)> &fn) override;
  std::string check_storage(bool repair) override;
  uint64_t max_payload_size() const override;
  std::string lock_dir() const override;
  // Counters: each tier counts its own hits, misses and damage; the NVRTC time a hit saved, the
  // compiles not stored and the tier failures are credited to every tier that answers, so that
  // `progcache stats` on a store shows what the fleet saved and met. The stack's own totals stay
  // in this process.
  void add_counters(const PersistentCounters &delta) override;
  PersistentCounters counters() override;
  // Every tier's stored counters, and the stack's own.
  void reset_counters() override;
  SharedCounters *shared_counters() override { return this; }
  // Leases come from the first available tier that keeps them (the shared store).
  std::optional<std::string> try_lease(ByteView key) override;
  void release_lease(ByteView key, const std::string &token) override;
  LeaseStore *leases() override { return this; }
  // Metadata: read from the first tier that has the record, written to every tier.
  std::optional<std::string> get_meta(std::string_view name) override;
  void put_meta(std::string_view name, ByteView record) override;
  // Records come back already verified by the tier that held them.
  bool in_process() const override { return true; }
  // Memos are written to every tier: another process reads them where any tier is shared.
  bool memos_outlive_process() const override;

  struct TierStats {
    std::string uri;
    CacheStats stats;
  };
  std::vector<TierStats> tier_stats() const;
  std::vector<Cache *> tiers() const;

 private:
  struct Tier {
    std::unique_ptr<Cache> cache;
    uint64_t backoff_base_ms = 0;  // 0: no back-off after a failure
    uint64_t timeout_ms = 0;       // 0: a local store, never skipped
    std::atomic<int64_t> retry_at_ms{0};
    std::atomic<uint64_t> consecutive_failures{0};
    std::atomic<uint64_t> errors{0}, skips{0};
  };
  bool available(Tier &tier);
  // Runs fn against one tier, keeping its back-off state: a tier in back-off is not called, a
  // failure is recorded (and kept in *first_error when given, if it is the first). true when
  // fn ran and succeeded.
  template <typename Fn>
  bool attempt(Tier &tier, Fn &&fn, std::optional<Error> *first_error = nullptr);
  void failed(Tier &tier, const Error &e);
  void succeeded(Tier &tier);
  // fn of the deepest tier that answers.
  uint64_t from_deepest(const char *what, uint64_t (Cache::*fn)());

  std::vector<std::unique_ptr<Tier>> tiers_;
  BackendEvents *events_;
  ForkSafeMutex counters_mutex_{ForkSafeMutex::kInner};
  PersistentCounters counters_;
};

}  // namespace progcache
