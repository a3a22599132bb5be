#include "core/tiered_backend.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <unordered_set>

#include "format/entry.hpp"
#include "util/error.hpp"

namespace progcache {
namespace {

constexpr uint64_t kMaxBackoffMs = 60'000;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

TieredBackend::TieredBackend(std::vector<std::unique_ptr<Cache>> tiers, const BackendConfig &config)
    : events_(config.events) {
  for (auto &cache : tiers) {
    auto tier = std::make_unique<Tier>();
    tier->backoff_base_ms = cache->backend().retry_backoff_ms();
    tier->timeout_ms = cache->backend().timeout_ms();
    tier->cache = std::move(cache);
    tiers_.push_back(std::move(tier));
  }
}

bool TieredBackend::available(Tier &tier) {
  if ((tier.backoff_base_ms == 0 && tier.timeout_ms == 0) ||
      now_ms() >= tier.retry_at_ms.load(std::memory_order_relaxed))
    return true;
  tier.skips.fetch_add(1, std::memory_order_relaxed);
  if (events_) events_->tier_skips.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void TieredBackend::failed(Tier &tier, const Error &e) {
  tier.errors.fetch_add(1, std::memory_order_relaxed);
  if (events_) events_->tier_errors.fetch_add(1, std::memory_order_relaxed);
  if (events_ && e.timed_out()) events_->tier_timeouts.fetch_add(1, std::memory_order_relaxed);
  std::string note = "tier " + tier.cache->display_uri() + " skipped: " + e.what();
  uint64_t delay = 0;
  if (tier.backoff_base_ms && e.status() == Status::remote) {
    const uint64_t n = tier.consecutive_failures.fetch_add(1, std::memory_order_relaxed);
    delay = std::min(kMaxBackoffMs, tier.backoff_base_ms << std::min<uint64_t>(n, 16));
  }
  // A server that accepts connections and never answers makes every call wait out the
  // timeout: after one, it is left alone for ten (even with backoff_ms=0).
  if (e.timed_out() && tier.timeout_ms) delay = std::max(delay, 10 * tier.timeout_ms);
  if (delay) {
    tier.retry_at_ms.store(now_ms() + int64_t(delay), std::memory_order_relaxed);
    note += " (retried in " + std::to_string(delay) + " ms)";
  }
  set_thread_warning(std::move(note));
}

void TieredBackend::succeeded(Tier &tier) {
  if (tier.consecutive_failures.load(std::memory_order_relaxed))
    tier.consecutive_failures.store(0, std::memory_order_relaxed);
}

template <typename Fn>
bool TieredBackend::attempt(Tier &tier, Fn &&fn, std::optional<Error> *first_error) {
  if (!available(tier)) return false;
  try {
    fn();
  } catch (const Error &e) {
    if (first_error && !*first_error) *first_error = e;
    failed(tier, e);
    return false;
  }
  succeeded(tier);
  return true;
}

SharedBlob TieredBackend::get(ByteView key, Access access) {
  std::optional<Error> first_error;
  size_t answered = 0;
  for (size_t i = 0; i < tiers_.size(); ++i) {
    std::optional<Hit> hit;
    if (!attempt(
            *tiers_[i], [&] { hit = tiers_[i]->cache->get(key, access); }, &first_error))
      continue;
    ++answered;
    if (!hit) continue;
    if (access == Access::peek) return std::move(hit->record);
    // Read through: the tiers above this one missed; give them the entry for next time.
    for (size_t j = 0; j < i; ++j)
      attempt(*tiers_[j], [&] { tiers_[j]->cache->put_verified(key, *hit); });
    return std::move(hit->record);
  }
  if (answered == 0 && first_error) throw *first_error;
  return nullptr;
}

void TieredBackend::put(ByteView key, Blob &&record, uint64_t) {
  std::string why;
  const auto parts = parse_entry(record.view(), &why);
  if (!parts) throw Error(Status::internal, "tiered put: " + why);
  // The stack's own cache encoded it (plain, unsigned): a tier that would store the same bytes
  // takes them as they are, the others encode their own.
  const ByteView payload = parts->payload, meta = parts->meta;
  const Hit hit{std::make_shared<const Blob>(std::move(record)), payload, meta};
  std::optional<Error> first_error;
  size_t stored = 0;
  for (auto &tier : tiers_)
    stored += attempt(
        *tier, [&] { tier->cache->put_verified(key, hit); }, &first_error);
  if (stored == 0) {
    if (first_error) throw *first_error;
    throw Error(Status::remote, "tiered put: every tier is in back-off after failures");
  }
}

bool TieredBackend::remove(ByteView key) {
  std::optional<Error> first_error;
  bool removed = false;
  for (auto &tier : tiers_) {
    // A tier in back-off is not contacted (each call would wait out its timeout), but the
    // delete is reported as failed: the entry may still be there.
    if (!available(*tier)) {
      if (!first_error)
        first_error = Error(Status::remote, "tier " + tier->cache->display_uri() +
                                                " is in back-off after a failure; the entry was "
                                                "not removed there");
      continue;
    }
    attempt(
        *tier, [&] { removed = tier->cache->remove(key) || removed; }, &first_error);
  }
  if (first_error) throw *first_error;
  return removed;
}

void TieredBackend::clear() {
  std::optional<Error> first_error;
  for (auto &tier : tiers_) {
    try {
      tier->cache->clear();
      succeeded(*tier);
    } catch (const Error &e) {
      if (!first_error) first_error = e;
      failed(*tier, e);
    }
  }
  if (first_error) throw *first_error;
}

uint64_t TieredBackend::from_deepest(const char *what, uint64_t (Cache::*fn)()) {
  std::optional<Error> first_error;
  for (auto it = tiers_.rbegin(); it != tiers_.rend(); ++it) {
    uint64_t value = 0;
    if (attempt(
            **it, [&] { value = ((*it)->cache.get()->*fn)(); }, &first_error))
      return value;
  }
  if (first_error) throw *first_error;
  throw Error(Status::remote,
              std::string("tiered ") + what + ": every tier is in back-off after failures");
}

uint64_t TieredBackend::count() {
  return from_deepest("count", &Cache::count);
}

uint64_t TieredBackend::size() {
  return from_deepest("size", &Cache::size);
}

void TieredBackend::list(const std::function<void(const EntryInfo &)> &fn) {
  std::unordered_set<std::string> seen;
  for (auto &tier : tiers_) {
    attempt(*tier, [&] {
      tier->cache->list([&](const EntryInfo &e) {
        if (seen.insert(e.key).second) fn(e);
      });
    });
  }
}

void TieredBackend::add_counters(const PersistentCounters &delta) {
  {
    std::lock_guard lock(counters_mutex_);
    counters_ += delta;
  }
  // What only the stack sees is recorded in every tier that answers: the time hits saved, the
  // compiles it could not store, and the failures of its tiers (a remote tier that is down
  // gets them recorded in the local ones).
  PersistentCounters forwarded;
  forwarded.compile_us_saved = delta.compile_us_saved;
  forwarded.uncacheable = delta.uncacheable;
  forwarded.tier_errors = delta.tier_errors;
  forwarded.tier_timeouts = delta.tier_timeouts;
  if (!forwarded.any()) return;
  for (auto &tier : tiers_)
    if (SharedCounters *shared = tier->cache->backend().shared_counters())
      attempt(*tier, [&] { shared->add_counters(forwarded); });
}

PersistentCounters TieredBackend::counters() {
  std::lock_guard lock(counters_mutex_);
  return counters_;
}

void TieredBackend::reset_counters() {
  {
    std::lock_guard lock(counters_mutex_);
    counters_ = {};
  }
  std::optional<Error> first_error;
  for (auto &tier : tiers_)
    if (SharedCounters *shared = tier->cache->backend().shared_counters())
      attempt(
          *tier, [&] { shared->reset_counters(); }, &first_error);
  if (first_error) throw *first_error;
}

std::optional<std::string> TieredBackend::try_lease(ByteView key) {
  for (size_t i = 0; i < tiers_.size(); ++i) {
    LeaseStore *leases = tiers_[i]->cache->backend().leases();
    std::optional<std::string> token;
    if (!leases || !attempt(*tiers_[i], [&] { token = leases->try_lease(key); }) || !token)
      continue;
    // The tier's index travels in the token, so the release goes back to it.
    return token->empty() ? *token : std::to_string(i) + ":" + *token;
  }
  return std::nullopt;
}

void TieredBackend::release_lease(ByteView key, const std::string &token) {
  const size_t colon = token.find(':');
  const size_t i = std::strtoul(token.substr(0, colon).c_str(), nullptr, 10);
  if (colon == std::string::npos || i >= tiers_.size()) return;
  // A failure is only recorded: the lease expires by itself.
  if (LeaseStore *leases = tiers_[i]->cache->backend().leases())
    attempt(*tiers_[i], [&] { leases->release_lease(key, token.substr(colon + 1)); });
}

std::string TieredBackend::check_storage(bool repair) {
  std::string report;
  for (auto &tier : tiers_)
    if (const std::string found = tier->cache->backend().check_storage(repair); !found.empty())
      report += (report.empty() ? "" : "; ") + tier->cache->display_uri() + ": " + found;
  return report;
}

std::optional<std::string> TieredBackend::get_meta(std::string_view name) {
  for (auto &tier : tiers_) {
    std::optional<std::string> record;
    if (attempt(*tier, [&] { record = tier->cache->backend().get_meta(name); }) && record)
      return record;
  }
  return std::nullopt;
}

bool TieredBackend::memos_outlive_process() const {
  return std::any_of(tiers_.begin(), tiers_.end(), [](const std::unique_ptr<Tier> &tier) {
    return tier->cache->backend().memos_outlive_process();
  });
}

void TieredBackend::put_meta(std::string_view name, ByteView record) {
  for (auto &tier : tiers_) attempt(*tier, [&] { tier->cache->backend().put_meta(name, record); });
}

uint64_t TieredBackend::max_payload_size() const {
  uint64_t most = 0;
  for (const auto &tier : tiers_) most = std::max(most, tier->cache->backend().max_payload_size());
  return most;
}

std::string TieredBackend::lock_dir() const {
  for (const auto &tier : tiers_)
    if (std::string dir = tier->cache->backend().lock_dir(); !dir.empty()) return dir;
  return {};
}

std::vector<Cache *> TieredBackend::tiers() const {
  std::vector<Cache *> out;
  for (const auto &tier : tiers_) out.push_back(tier->cache.get());
  return out;
}

std::vector<TieredBackend::TierStats> TieredBackend::tier_stats() const {
  std::vector<TierStats> out;
  for (const auto &tier : tiers_) {
    TierStats t;
    t.uri = tier->cache->display_uri();
    t.stats = tier->cache->stats();
    t.stats.tier_errors = tier->errors.load(std::memory_order_relaxed);
    t.stats.tier_skips = tier->skips.load(std::memory_order_relaxed);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace progcache
