#include "core/loader.hpp"

#include <string>
#include <vector>

#include "cuda/driver.hpp"
#include "util/error.hpp"

namespace progcache {

void throw_if_compile_failed(const CompileResult &result) {
  if (result.status == Status::compile)
    throw Error(Status::compile, result.tool + " refused the program:\n" + result.meta.log);
}

namespace {

// The architecture an NVRTC program was compiled for, as nvJitLink names it (-arch=sm_XX).
std::string link_arch(const ProgramDesc &program) {
  constexpr std::string_view kPrefix = "--gpu-architecture=";
  for (const std::string &o : program_options(program).canonical) {
    if (o.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    std::string arch = o.substr(kPrefix.size());
    if (arch.compare(0, 8, "compute_") == 0) arch = "sm_" + arch.substr(8);
    return "-arch=" + arch;
  }
  throw Error(Status::invalid_arg,
              "an LTO-IR program is linked for its -arch=sm_XX, and this one names none");
}

// The link that makes an LTO-IR program loadable: its LTO-IR, whole-program optimised for its
// architecture. A second entry, keyed by the LTO-IR's content, so a warm load links nothing.
ProgramDesc link_of(const ProgramDesc &program, const CompileResult &ltoir,
                    std::vector<std::string> *owned) {
  ProgramDesc link;
  link.name = "link";
  link.code_type = CodeType::link;
  link.target = Target::cubin;
  link.source = ByteView("", 0);
  *owned = {link_arch(program), "-lto"};
  link.options.assign(owned->begin(), owned->end());
  link.link_inputs = {LinkInput{LinkInputKind::ltoir, program.name, ltoir.code}};
  return link;
}

// The link's result, answering for the program's name expressions (the module looks kernels up
// by them: "scale<float>" on the linked cubin).
std::shared_ptr<CompileResult> with_lowered_names(std::shared_ptr<CompileResult> link,
                                                  const CompileResult &program) {
  auto r = std::make_shared<CompileResult>(*link);
  r->meta.lowered_names = program.meta.lowered_names;
  return r;
}

}  // namespace

LoadedModule load_through_cache(Cache *cache, const ProgramDesc &program) {
  LoadedModule loaded;
  loaded.result = compile_through_cache(cache, program, {});
  throw_if_compile_failed(*loaded.result);
  // LTO-IR is linked (through the cache) into the cubin that is loaded.
  std::shared_ptr<CompileResult> ltoir;
  std::vector<std::string> link_options;
  ProgramDesc link;
  if (program.target == Target::ltoir) {
    ltoir = loaded.result;
    link = link_of(program, *ltoir, &link_options);
    loaded.result = with_lowered_names(compile_through_cache(cache, link, {}), *ltoir);
    throw_if_compile_failed(*loaded.result);
  }
  const ProgramDesc &loadable = ltoir ? link : program;
  const Driver &driver = Driver::get();
  std::string why;
  Driver::Load outcome = driver.load_module(loaded.result->code, &loaded.module, &why);
  if (outcome == Driver::Load::image_rejected && loaded.result->from_cache) {
    loaded.result = recompile(cache, loadable, {});
    if (ltoir) loaded.result = with_lowered_names(loaded.result, *ltoir);
    throw_if_compile_failed(*loaded.result);
    if (cache) cache->note_healed();
    outcome = driver.load_module(loaded.result->code, &loaded.module, &why);
  }
  if (outcome == Driver::Load::image_rejected)
    throw Error(Status::cuda, "cuModuleLoadData failed: " + why);
  return loaded;
}

}  // namespace progcache
