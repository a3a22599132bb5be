// The include scanner reads headers anyone may have written: arbitrary source text (comments,
// literals, raw strings, splices, directives, __has_include in every form) must neither crash
// nor read out of bounds, scanning is deterministic (the key depends on it), and the fast scan
// finds what the reference lexers find with every version of its kernels. The program lives in
// a scratch directory holding two headers that include each other and one through -I (absolute
// paths: libFuzzer reads its corpus from the working directory).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "core/include_scan.hpp"
#include "core/scan_blocks.hpp"
#include "core/text_scan.hpp"
#include "scratch.hpp"

using namespace progcache;

namespace {

std::string scratch;

bool set_up() {
  scratch = testutil::make_scratch_dir("fuzz-scan");
  ::mkdir((scratch + "/inc").c_str(), 0700);
  std::ofstream(scratch + "/a.h")
      << "#pragma once\n#include \"b.h\"\n#include <c.h>\n#define A 1\n";
  std::ofstream(scratch + "/b.h") << "#include \"a.h\"\n#if __has_include(<version>)\n#endif\n";
  std::ofstream(scratch + "/inc/c.h") << "#include_next <c.h>\n#define C __TIME__\n";
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const bool ready = set_up();
  if (!ready) return 0;
  const std::string source(reinterpret_cast<const char *>(data), size);
  static const std::string name = scratch + "/fuzz.cu", inc = "-I" + scratch + "/inc";
  ProgramDesc p;
  p.name = name;
  p.source = ByteView(source);
  p.options = {inc, "-I", scratch};
  // The fast scan reads the text as the reference lexers do (core/text_scan.hpp), with each
  // version of its kernels this CPU runs: a machine without AVX-512 takes another one's path.
  const Directives directives = find_directives_reference(source);
  const SourceFacts lexical = lexical_facts_reference(source);
  for (const auto level :
       {scan_blocks::Level::portable, scan_blocks::Level::avx2, scan_blocks::Level::avx512}) {
    scan_blocks::limit_level(level);
    const TextFacts fast = scan_text(source, true);
    if (!(fast.directives == directives) || !(fast.lexical == lexical)) __builtin_trap();
  }
  const IncludeScan first = scan_includes(p, nullptr);
  const IncludeScan second = scan_includes(p, nullptr);
  if (first.dependencies.size() != second.dependencies.size() ||
      first.uncacheable != second.uncacheable)
    __builtin_trap();
  for (size_t i = 0; i < first.dependencies.size(); ++i)
    if (first.dependencies[i].path != second.dependencies[i].path ||
        first.dependencies[i].digest != second.dependencies[i].digest)
      __builtin_trap();
  return 0;
}
