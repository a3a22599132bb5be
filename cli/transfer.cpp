// progcache export / import: a cache's entries as one bundle file (see src/bundle.hpp).
#include <chrono>
#include <cstdio>

#include "cli.hpp"
#include "core/bundle.hpp"

namespace progcache::cli {

std::string human_size(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
  return buf;
}

int cmd_export(Cache &cache, const std::string &path) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const BundleProgress p = export_bundle(cache, path, [&](const BundleProgress &p) {
    std::fprintf(stderr, "progcache: export: %llu entries, %s so far (%.1f s)\n",
                 (unsigned long long)p.entries, human_size(p.file_bytes).c_str(), elapsed());
  });
  std::fprintf(path == "-" ? stderr : stdout,
               "exported %llu entries (%s of payload) to %s: %s in %.2f s\n",
               (unsigned long long)p.entries, human_size(p.bytes).c_str(), path.c_str(),
               human_size(p.file_bytes).c_str(), elapsed());
  return 0;
}

int cmd_import(Cache &cache, const std::string &path) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const BundleProgress p = import_bundle(
      cache, path,
      [&](const BundleProgress &p) {
        std::fprintf(stderr, "progcache: import: %llu entries, %s read (%.1f s)\n",
                     (unsigned long long)p.entries, human_size(p.file_bytes).c_str(), elapsed());
      },
      [](const std::string &why) { std::printf("rejected %s\n", why.c_str()); });
  std::printf("imported %llu entries (%s) in %.2f s, %llu rejected\n",
              (unsigned long long)p.entries, human_size(p.bytes).c_str(), elapsed(),
              (unsigned long long)p.rejected);
  return p.rejected ? 1 : 0;
}

}  // namespace progcache::cli
