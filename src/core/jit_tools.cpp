#include "core/jit_tools.hpp"

#include <algorithm>

#include "cuda/nvjitlink.hpp"
#include "cuda/nvvm.hpp"
#include "util/error.hpp"
#include "util/fsutil.hpp"
#include "util/hex.hpp"

namespace progcache {
namespace {

const LibrarySpec &library_of(const ProgramDesc &program) {
  return program.code_type == CodeType::nvvm ? kNvvmLibrary : kNvJitLinkLibrary;
}

bool uses_libdevice(const ProgramDesc &program) {
  return program.code_type == CodeType::nvvm &&
         std::find(program.options.begin(), program.options.end(), kUseLibdevice) !=
             program.options.end();
}

// The libdevice field of the key: the file, and the digest of the bytes that are (or would be)
// linked.
KeyField libdevice_field(const std::string &path, ByteView bytes) {
  const ContentDigest d = content_digest(bytes);
  KeyField f;
  f.name = "libdevice";
  f.value = std::string(d.begin(), d.end());
  f.shown = path + " " + to_hex(ByteView(d.data(), 8));
  return f;
}

std::string read_libdevice(const LibraryLocation &nvvm, std::string *path) {
  *path = find_libdevice(nvvm);
  if (path->empty())
    throw Error(Status::cuda_unavailable, std::string(kUseLibdevice) +
                                              ": no libdevice.10.bc beside libNVVM '" + nvvm.path +
                                              "' (set PCACHE_LIBDEVICE)");
  std::string bytes;
  if (!read_whole_file(*path, &bytes, 64 << 20))
    throw Error(Status::cuda_unavailable, "cannot read libdevice '" + *path + "'");
  return bytes;
}

}  // namespace

const char *jit_library_name(const ProgramDesc &program) {
  return library_of(program).what.data();
}

KeyContext jit_key_context(const ProgramDesc &program, MemoStore *memos) {
  const LibrarySpec &spec = library_of(program);
  KeyContext context;
  context.name_in_identity = true;  // module and input names reach logs and debug information
  if (!uses_libdevice(program)) {
    context.nvrtc_build = current_library_build(spec, memos);
  } else {  // the build and libdevice beside it, from one location
    const LibraryLocation loc = locate_library(spec, memos);
    context.nvrtc_build = library_build(spec, loc);
    std::string path;
    const std::string bytes = read_libdevice(loc, &path);
    context.environment.push_back(libdevice_field(path, ByteView(bytes)));
  }
  return context;
}

JitRun run_jit(const ProgramDesc &program, MemoStore *memos, const JitRunner &runner) {
  const LibrarySpec &spec = library_of(program);
  const LibraryLocation loc = locate_library(spec, memos);
  JitRun run;
  run.context.name_in_identity = true;
  if (runner) {
    // The front end links libdevice itself, if at all: keyed as the key context keys it.
    run.context.environment = jit_key_context(program, memos).environment;
    run.out = runner(program);
    run.version = run.out.library_version;
  } else if (program.code_type == CodeType::nvvm) {
    const Nvvm &nvvm = Nvvm::load(loc);
    run.version = nvvm.version();
    std::vector<NvvmModule> modules{{program.name, program.source.str()}};
    for (const auto &[name, bytes] : program.headers) modules.push_back({name, bytes});
    std::vector<std::string_view> options;
    bool gen_lto = false;
    for (std::string_view o : program.options) {
      if (o == kUseLibdevice) continue;
      gen_lto |= o == "-gen-lto";
      options.push_back(o);
    }
    if (program.target == Target::ltoir && !gen_lto) options.push_back("-gen-lto");
    std::vector<NvvmModule> lazy;
    std::string libdevice_path, libdevice;
    if (uses_libdevice(program)) {
      libdevice = read_libdevice(loc, &libdevice_path);
      lazy.push_back({"libdevice", libdevice});
      run.context.environment.push_back(libdevice_field(libdevice_path, ByteView(libdevice)));
    }
    run.out = nvvm.compile(modules, lazy, options);
  } else {
    const NvJitLink &linker = NvJitLink::load(loc);
    run.version = linker.version();
    std::vector<LinkInput> inputs = program.link_inputs;
    if (program.code_type == CodeType::ptx)
      inputs = {LinkInput{LinkInputKind::ptx, program.name, program.source}};
    std::vector<std::string> names(inputs.size());  // "input<i>" for an unnamed one
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].name.empty()) inputs[i].name = names[i] = "input" + std::to_string(i);
    run.out = linker.link(inputs, program.options, program.target);
  }
  // The build that ran: the image this process has mapped now that it is loaded.
  run.context.nvrtc_build = library_build(spec, loc);
  return run;
}

}  // namespace progcache
