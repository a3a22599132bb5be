// A cache's counters: its handle's own (CacheStats), and how much of them it shares with every
// process using its storage (PersistentCounters, flushed now and then and on close).
#include "backends/memory_backend.hpp"
#include "core/cache.hpp"
#include "core/tiered_backend.hpp"
#include "util/error.hpp"

namespace progcache {

std::vector<std::pair<std::string, CacheStats>> Cache::tier_stats() const {
  std::vector<std::pair<std::string, CacheStats>> out;
  if (tiered_) {
    for (auto &t : tiered_->tier_stats()) out.emplace_back(t.uri, t.stats);
  } else {
    out.emplace_back(display_uri(), stats());
  }
  return out;
}

void Cache::count_op() {
  // Share the counters now and then, so that a crashed process loses few; a flush is a small
  // write, amortised over 1024 operations. A process's own memory shares nothing: its counters
  // are gathered when asked for (persistent_counters), and a hit spares the atomic add.
  if (backend_->in_process()) return;
  if (ops_since_flush_.fetch_add(1, std::memory_order_relaxed) + 1 >= 1024) {
    ops_since_flush_.store(0, std::memory_order_relaxed);
    try {
      flush_counters();
    } catch (const Error &) {
    }
  }
}

PersistentCounters Cache::handle_totals() const {
  const CacheStats s = stats();
  PersistentCounters t;
#define PCACHE_COUNTER_TOTAL(name) t.name = int64_t(s.name);
  PCACHE_SHARED_COUNTERS(PCACHE_COUNTER_TOTAL)
#undef PCACHE_COUNTER_TOTAL
  return t;
}

bool Cache::flush_counters() {
  if (!backend_) return false;  // the backend failed to open (its constructor threw)
  const PersistentCounters now = handle_totals();
  PersistentCounters d;
  for (size_t i = 0; i < flushed_.size(); ++i) {
    const auto field = PersistentCounters::kFields[i].value;
    d.*field = now.*field - flushed_[i].exchange(now.*field);
  }
  if (!d.any()) return false;
  SharedCounters *shared = backend_->shared_counters();
  if (!shared) {
    std::lock_guard lock(local_counters_mutex_);
    local_counters_ += d;
    return false;
  }
  try {
    shared->add_counters(d);
  } catch (const Error &e) {
    if (e.status() != Status::busy) throw;
    // Busy: keep them for the next flush (a closing handle loses them; they are advisory).
    for (size_t i = 0; i < flushed_.size(); ++i)
      flushed_[i].fetch_sub(d.*PersistentCounters::kFields[i].value);
    return true;
  }
  return false;
}

void Cache::zero_counters() {
  const PersistentCounters now = handle_totals();
  for (size_t i = 0; i < flushed_.size(); ++i)
    flushed_[i].store(now.*PersistentCounters::kFields[i].value);
  if (SharedCounters *shared = backend_->shared_counters()) return shared->reset_counters();
  std::lock_guard lock(local_counters_mutex_);
  local_counters_ = {};
}

PersistentCounters Cache::persistent_counters() {
  flush_counters();
  if (SharedCounters *shared = backend_->shared_counters()) return shared->counters();
  std::lock_guard lock(local_counters_mutex_);
  return local_counters_;
}

CacheStats Cache::stats() const {
  CacheStats s;
  auto ld = [](const std::atomic<uint64_t> &a) { return a.load(std::memory_order_relaxed); };
  const MemoryBackend::UseCounts copied =
      memory_ ? memory_->use_counts() : MemoryBackend::UseCounts{};
  s.hits = reads_.total(0) + copied.uses;
  s.misses = ld(misses_);
  s.puts = ld(puts_);
  s.deletes = ld(deletes_);
  s.evictions = ld(events_.evictions);
  s.bytes_read = reads_.total(1) + copied.payload_bytes;
  s.bytes_written = ld(bytes_written_);
  s.corrupt = ld(corrupt_) + ld(events_.corrupt);
  s.healed = ld(healed_);
  s.uncacheable = ld(uncacheable_);
  s.tier_errors = ld(events_.tier_errors);
  s.tier_skips = ld(events_.tier_skips);
  s.compile_us_saved = ld(saved_us_);
  s.tier_timeouts = ld(events_.tier_timeouts);
  return s;
}

}  // namespace progcache
