// progcache export FILE: every entry in one bundle file (- = standard output).
#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_export(Invocation &in) {
  const std::string &path = in.args[0];
  const int64_t t0 = now_ns();
  Progress progress("export", entry_count(in.cache));
  pcache_transfer done{};
  check(pcache_admin_export(
      in.cache, path.c_str(),
      [](const pcache_transfer *p, void *context) {
        static_cast<Progress *>(context)->update(p->entries, ", " + human_size(p->file_bytes));
      },
      &progress, &done));
  progress.finish();
  std::fprintf(path == "-" ? stderr : stdout,
               "exported %llu entries (%s of payload) to %s: %s in %.2f s\n",
               (unsigned long long)done.entries, human_size(done.payload_bytes).c_str(),
               path.c_str(), human_size(done.file_bytes).c_str(), seconds_since(t0));
  return 0;
}

}  // namespace progcache::cli
