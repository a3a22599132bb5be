// Test helper: compiles a program with NVRTC under progcache's observer and prints what the
// compile was seen to depend on: one "present PATH" or "absent PATH" line per file NVRTC read or
// probed, "env NAME" per variable it read during the compile, then "uncacheable: WHY" if the
// observation cannot key it. With --load-time-variables, prints instead the variables keyed
// because NVRTC may read them only when it loads (core/key.hpp).
// usage: observe_deps NAME|- SOURCE_FILE [NVRTC options...]
//        observe_deps --load-time-variables
// NVRTC is found as progcache finds it ($PCACHE_NVRTC_LIBRARY to choose one).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/key.hpp"
#include "core/observation.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/nvrtc_observer.hpp"

int main(int argc, char **argv) {
  using namespace progcache;
  if (argc == 2 && std::strcmp(argv[1], "--load-time-variables") == 0) {
    for (std::string_view v : nvrtc_load_time_variables())
      std::printf("%.*s\n", int(v.size()), v.data());
    return 0;
  }
  if (argc < 3) return 2;
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();
  ProgramDesc p;
  if (std::string(argv[1]) != "-") p.name = argv[1];
  p.source = ByteView(source);
  p.target = Target::ptx;
  for (int i = 3; i < argc; ++i) p.options.emplace_back(argv[i]);
  const NvrtcLocation loc = locate_nvrtc();
  Nvrtc &nvrtc = Nvrtc::load(loc);
  NvrtcObservation recording;
  NvrtcOutput out;
  {
    ObservationScope scope(&recording, nvrtc.path());
    out = nvrtc.compile(p);
  }
  const CompileSetting setting = current_setting(p);
  const Interpretation seen =
      interpret(recording, p, setting, nullptr, ByteView(out.code), out.log, out.ok);
  if (!seen.observation) {
    std::printf("uncacheable: %s\n", seen.not_stored.c_str());
    return 0;
  }
  for (const auto &[path, present] : observed_paths(*seen.observation, setting))
    std::printf("%s %s\n", present ? "present" : "absent", path.c_str());
  for (const auto &[name, value] : seen.observation->environment)
    std::printf("env %s\n", name.c_str());
  return 0;
}
