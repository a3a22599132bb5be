// progcache import FILE: verify every record of a bundle and store the good ones (- = standard
// input). Exit status 1 if a record was rejected or the bundle is damaged.
#include <sys/stat.h>

#include <cstdio>

#include "commands.hpp"

namespace progcache::cli {

int cmd_import(Invocation &in) {
  const std::string &path = in.args[0];
  const int64_t t0 = now_ns();
  struct stat st {};
  const bool sized = path != "-" && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  Progress progress("import (bytes)", sized ? uint64_t(st.st_size) : 0);
  pcache_transfer done{};
  check(pcache_admin_import(
      in.cache, path.c_str(),
      [](const pcache_transfer *p, void *context) {
        static_cast<Progress *>(context)->update(p->file_bytes,
                                                 ", " + std::to_string(p->entries) + " entries");
      },
      [](const char *reason, void *) { std::printf("rejected %s\n", reason); }, &progress, &done));
  progress.finish();
  std::printf("imported %llu entries (%s) in %.2f s, %llu rejected\n",
              (unsigned long long)done.entries, human_size(done.payload_bytes).c_str(),
              seconds_since(t0), (unsigned long long)done.rejected);
  return done.rejected ? 1 : 0;
}

}  // namespace progcache::cli
