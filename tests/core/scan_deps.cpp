// Test helper: prints the include scan of a program, one "present PATH" or "absent PATH" line per
// dependency, then "uncacheable: WHY" if the scan refused it.
// usage: scan_deps NAME|- SOURCE_FILE [NVRTC options...]   ("-" = no name, NVRTC's default)
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/include_scan.hpp"

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();
  progcache::ProgramDesc p;
  if (std::string(argv[1]) != "-") p.name = argv[1];
  p.source = progcache::ByteView(source);
  for (int i = 3; i < argc; ++i) p.options.emplace_back(argv[i]);
  const progcache::IncludeScan scan = progcache::scan_includes(p, nullptr);
  for (const auto &d : scan.dependencies)
    std::printf("%s %s\n", d.present ? "present" : "absent", d.path.c_str());
  if (!scan.uncacheable.empty()) std::printf("uncacheable: %s\n", scan.uncacheable.c_str());
  return 0;
}
