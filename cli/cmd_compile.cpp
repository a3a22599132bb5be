// progcache compile FILE.cu: compile through the cache, say hit or miss and what it cost.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "program.hpp"

namespace progcache::cli {
namespace {

struct FreeCompiled {
  void operator()(pcache_compiled *r) const { pcache_compiled_free(r); }
};

}  // namespace

int cmd_compile(Invocation &in) {
  const Program program(in);
  pcache_compiled *raw = nullptr;
  const pcache_status status = pcache_compile(in.cache, &program.get(), &raw);
  const std::unique_ptr<pcache_compiled, FreeCompiled> result(raw);
  const std::string log = result ? pcache_compiled_log(result.get()) : "";
  if (status == PCACHE_ERR_COMPILE && result) {
    std::fputs(log.c_str(), stderr);
    throw Failure(status, "NVRTC could not compile " + program.file() + " (log above)");
  }
  check(status);
  // NVRTC's warnings and ptxas output (-Xptxas -v), replayed from the stored log on a hit, so
  // that a hit shows what the compile that made it showed.
  if (!log.empty()) {
    std::fputs(log.c_str(), stderr);
    if (log.back() != '\n') std::fputc('\n', stderr);
  }
  const pcache_compiled *r = result.get();
  const char *file = program.file().c_str();
  const std::string took = milliseconds(pcache_compiled_elapsed_us(r));
  const std::string nvrtc = nvrtc_text(pcache_compiled_nvrtc_version(r));
  const std::string not_stored = pcache_admin_compiled_not_stored(r);
  if (pcache_compiled_from_cache(r))
    std::printf("hit:  %s in %s (NVRTC %s took %s when it was compiled)\n", file, took.c_str(),
                nvrtc.c_str(), milliseconds(pcache_compiled_compile_us(r)).c_str());
  else if (not_stored.empty())
    std::printf("miss: %s compiled in %s (NVRTC %s) and stored\n", file, took.c_str(),
                nvrtc.c_str());
  else
    std::printf("miss: %s compiled in %s (NVRTC %s), not stored: %s\n", file, took.c_str(),
                nvrtc.c_str(), not_stored.c_str());
  size_t size = 0;
  const void *code = pcache_compiled_data(r, &size);
  std::printf("      %zu-byte %s, key %s\n", size, program.target_name().c_str(),
              to_hex(pcache_compiled_key(r), PCACHE_KEY_SIZE).c_str());
  for (const std::string &e : program.name_expressions())
    if (const char *lowered = pcache_compiled_lowered_name(r, e.c_str()))
      std::printf("      %s -> %s\n", e.c_str(), lowered);
  if (in.has("output")) write_file(in.value("output"), code, size);
  return 0;
}

}  // namespace progcache::cli
