#include "core/loader.hpp"

#include <string>

#include "cuda/driver.hpp"
#include "util/error.hpp"

namespace progcache {

void throw_if_compile_failed(const CompileResult &result) {
  if (result.status == Status::compile)
    throw Error(Status::compile, "NVRTC compile failed:\n" + result.meta.log);
}

LoadedModule load_through_cache(Cache *cache, const ProgramDesc &program) {
  if (program.target == Target::ltoir)
    throw Error(Status::unsupported,
                "an LTO-IR result cannot be loaded as a module; link it with nvJitLink");
  LoadedModule loaded;
  loaded.result = compile_through_cache(cache, program, {});
  throw_if_compile_failed(*loaded.result);
  const Driver &driver = Driver::get();
  std::string why;
  Driver::Load outcome = driver.load_module(loaded.result->code, &loaded.module, &why);
  if (outcome == Driver::Load::image_rejected && loaded.result->from_cache) {
    loaded.result = recompile(cache, program, {});
    throw_if_compile_failed(*loaded.result);
    if (cache) cache->note_healed();
    outcome = driver.load_module(loaded.result->code, &loaded.module, &why);
  }
  if (outcome == Driver::Load::image_rejected)
    throw Error(Status::cuda, "cuModuleLoadData failed: " + why);
  return loaded;
}

}  // namespace progcache
