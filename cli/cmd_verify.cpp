// progcache verify: read and check every entry; damaged ones are removed and reported. Exit
// status 1 when damage was found (and removed), like fsck.
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_verify(Invocation &in) {
  const int64_t t0 = now_ns();
  // The store's own structures first (a damaged index hides entries from lookups while every
  // entry reads well), repaired before the entries are read.
  int32_t storage_damaged = 0;
  check(pcache_admin_check_storage(in.cache, 1, &storage_damaged));
  if (storage_damaged) std::printf("storage: %s\n", library_message().c_str());
  const std::vector<ListedEntry> entries = list_entries(in.cache);
  Progress progress("verify", entries.size());
  size_t checked = 0, good = 0, damaged = 0;
  for (const ListedEntry &e : entries) {
    pcache_entry *entry = nullptr;
    const pcache_status s = pcache_admin_peek(in.cache, e.key.data(), e.key.size(), &entry);
    pcache_entry_free(entry);
    if (s == PCACHE_ERR_CORRUPT) {
      ++damaged;
      progress.finish();  // the report takes the line; the next update redraws it
      std::printf("removed damaged entry %s: %s\n", show_key(e.key).c_str(),
                  library_message().c_str());
    } else if (check(s) == PCACHE_OK) {
      ++good;
    }  // else removed by another process since the listing
    progress.update(++checked);
  }
  progress.finish();
  std::printf("verified %zu entries in %.2f s: %zu good, %zu damaged and removed\n", checked,
              seconds_since(t0), good, damaged);
  return damaged || storage_damaged ? 1 : 0;
}

}  // namespace progcache::cli
