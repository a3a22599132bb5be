// A file's identity as stat sees it, for memos that vouch for a file's content without reading
// it (docs/keys.md: the header memo and the NVRTC identity).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <string>

#include "util/timespec_ns.hpp"

namespace progcache {

struct StatIdentity {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  // A time outside the range where times compare (util/timespec_ns.hpp): such a file is always
  // racy, never settled, so its content is read each time. Not part of the identity.
  bool far_dated = false;

  static StatIdentity of(const struct stat &st) {
    StatIdentity id;
    id.dev = uint64_t(st.st_dev);
    id.ino = uint64_t(st.st_ino);
    id.size = uint64_t(st.st_size);
    id.mtime_ns = identity_ns(st.st_mtim);
    id.ctime_ns = identity_ns(st.st_ctim);
    id.far_dated = !within_held_range(st.st_mtim) || !within_held_range(st.st_ctim);
    return id;
  }
  bool operator==(const StatIdentity &o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns &&
           ctime_ns == o.ctime_ns;
  }
  std::string text() const {
    return std::to_string(dev) + ":" + std::to_string(ino) + ":" + std::to_string(size) + ":" +
           std::to_string(mtime_ns) + ":" + std::to_string(ctime_ns);
  }
  // Changed less than kRacySeconds ago: a second write within the file system's timestamp
  // granularity could leave the same stat, so the content must be read, never vouched for.
  static constexpr int64_t kRacySeconds = 2;
  bool is_racy() const {
    if (far_dated) return true;
    struct timespec now;
    ::clock_gettime(CLOCK_REALTIME, &now);
    const int64_t now_ns = held_ns(now);
    const int64_t newest = mtime_ns > ctime_ns ? mtime_ns : ctime_ns;
    return now_ns - newest < kRacySeconds * 1000000000;
  }
  // true when any later change to the file must show in its identity. coarse_before is
  // CLOCK_REALTIME_COARSE read before the stat: the clock the kernel stamps changes with, so a
  // change after the stat is stamped at least that, truncated to the file system's granularity.
  // That granularity is taken as the largest power of ten both times are multiples of (1 ns on
  // ext4, XFS, btrfs, tmpfs, almost always; 10 ms on exFAT; whole seconds, taken as
  // kRacySeconds since FAT keeps two): a file last changed at least that long before the clock
  // was read cannot change again and keep its times.
  bool settled_before(const struct timespec &coarse_before) const {
    if (far_dated) return false;
    const int64_t before_ns = held_ns(coarse_before);
    const int64_t newest = mtime_ns > ctime_ns ? mtime_ns : ctime_ns;
    return before_ns - newest >= apparent_granularity_ns();
  }
  int64_t apparent_granularity_ns() const {
    int64_t g = 1;
    while (g < 1000000000 && mtime_ns % (g * 10) == 0 && ctime_ns % (g * 10) == 0) g *= 10;
    return g == 1000000000 ? kRacySeconds * 1000000000 : g;
  }
};

}  // namespace progcache
