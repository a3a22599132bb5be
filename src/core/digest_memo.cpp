#include "core/digest_memo.hpp"

#include <cstring>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "util/fork_guard.hpp"

namespace progcache {
namespace {

struct Kept {
  std::string prefix, source;
  ContentDigest digest;
};

struct Seen {
  ContentDigest digest{};
  bool filled = false;
};

struct State {
  ForkSafeMutex mutex{ForkSafeMutex::kInner};
  std::list<std::shared_ptr<const Kept>> kept;  // most recently used first
  size_t kept_bytes = 0;
  static constexpr size_t kSeenSlots = 32;
  Seen seen[kSeenSlots];
  size_t next_seen = 0;
};

// Constructed with the library, as the other fork-safe locks are (util/fork_guard.hpp).
State g_state;

State &state() {
  return g_state;
}

bool memoised_size(size_t size) {
  return size >= ProgramDigestMemo::kMinSource && size <= ProgramDigestMemo::kMaxSource;
}

}  // namespace

std::optional<ContentDigest> ProgramDigestMemo::find(std::string_view prefix, ByteView source) {
  if (!memoised_size(source.size)) return std::nullopt;
  State &s = state();
  // Compared outside the lock (a megabyte's memcmp is tens of microseconds): the candidates are
  // held by reference, so eviction meanwhile frees nothing they point at.
  std::shared_ptr<const Kept> candidates[4];
  size_t n = 0;
  {
    std::lock_guard lock(s.mutex);
    for (const auto &k : s.kept)
      if (k->source.size() == source.size && k->prefix == prefix && n < std::size(candidates))
        candidates[n++] = k;
  }
  for (size_t i = 0; i < n; ++i) {
    const Kept &k = *candidates[i];
    if (std::memcmp(k.source.data(), source.data, source.size) != 0) continue;
    std::lock_guard lock(s.mutex);
    for (auto it = s.kept.begin(); it != s.kept.end(); ++it)
      if (*it == candidates[i]) {
        s.kept.splice(s.kept.begin(), s.kept, it);
        break;
      }
    return k.digest;
  }
  return std::nullopt;
}

void ProgramDigestMemo::note(std::string_view prefix, ByteView source,
                             const ContentDigest &digest) {
  if (!memoised_size(source.size)) return;
  State &s = state();
  {
    // The digest names the bytes it was computed from (prefix and source): one seen before is a
    // second sight of the same bytes.
    std::lock_guard lock(s.mutex);
    Seen *match = nullptr;
    for (Seen &seen : s.seen)
      if (seen.filled && seen.digest == digest) match = &seen;
    if (!match) {
      s.seen[s.next_seen++ % State::kSeenSlots] = Seen{digest, true};
      return;
    }
    *match = Seen{};
  }
  // Copied outside the lock; a copy that cannot be made is only a digest not kept.
  std::shared_ptr<const Kept> kept;
  try {
    kept =
        std::make_shared<const Kept>(Kept{std::string(prefix), std::string(source.str()), digest});
  } catch (const std::bad_alloc &) {
    return;
  }
  std::list<std::shared_ptr<const Kept>> dropped;  // freed after the lock (megabytes each)
  std::lock_guard lock(s.mutex);
  try {
    s.kept.push_front(std::move(kept));
  } catch (const std::bad_alloc &) {
    return;
  }
  s.kept_bytes += source.size;
  while (s.kept_bytes > kMaxKeptBytes) {
    s.kept_bytes -= s.kept.back()->source.size();
    dropped.splice(dropped.begin(), s.kept, std::prev(s.kept.end()));
  }
}

size_t ProgramDigestMemo::kept_bytes() {
  State &s = state();
  std::lock_guard lock(s.mutex);
  return s.kept_bytes;
}

void ProgramDigestMemo::clear() {
  State &s = state();
  std::lock_guard lock(s.mutex);
  s.kept.clear();
  s.kept_bytes = 0;
  for (Seen &seen : s.seen) seen = Seen{};
}

ProgramDigestMemo &program_digest_memo() {
  static ProgramDigestMemo memo;
  return memo;
}

}  // namespace progcache
