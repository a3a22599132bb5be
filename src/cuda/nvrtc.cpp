// Loading the real NVRTC (every function resolved once per file and process) and compiling with
// it.
#include "cuda/nvrtc.hpp"

#include <dlfcn.h>
#include <nvrtc.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>

#include "util/error.hpp"
#include "util/fork_guard.hpp"

namespace progcache {

Nvrtc::Nvrtc() = default;
Nvrtc::~Nvrtc() = default;

const NvrtcApi &Nvrtc::api() const {
  return *api_;
}

namespace {
ForkSafeMutex g_loaded_mutex;
std::map<std::string, std::unique_ptr<Nvrtc>> g_loaded;  // lives as long as the process
}  // namespace

const Nvrtc *Nvrtc::find_loaded(const std::string &path) {
  std::lock_guard lock(g_loaded_mutex);
  auto it = g_loaded.find(path);
  return it == g_loaded.end() ? nullptr : it->second.get();
}

Nvrtc &Nvrtc::load(const NvrtcLocation &where) {
  std::lock_guard lock(g_loaded_mutex);
  auto &loaded = g_loaded;
  if (auto it = loaded.find(where.path); it != loaded.end()) return *it->second;
  void *h = ::dlopen(where.path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h)
    throw Error(Status::cuda_unavailable,
                "cannot load NVRTC '" + where.path + "': " + (::dlerror() ?: "unknown error"));
  auto api = std::make_unique<NvrtcApi>();
  api->handle = h;
  bool missing = false;
  std::string missing_name;
  auto resolve = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
    if (!fn && !missing) {
      missing = true;
      missing_name = name;
    }
  };
  resolve(api->version, "nvrtcVersion");
  resolve(api->error_string, "nvrtcGetErrorString");
  resolve(api->create, "nvrtcCreateProgram");
  resolve(api->destroy, "nvrtcDestroyProgram");
  resolve(api->compile, "nvrtcCompileProgram");
  resolve(api->log_size, "nvrtcGetProgramLogSize");
  resolve(api->log, "nvrtcGetProgramLog");
  resolve(api->ptx_size, "nvrtcGetPTXSize");
  resolve(api->ptx, "nvrtcGetPTX");
  resolve(api->cubin_size, "nvrtcGetCUBINSize");
  resolve(api->cubin, "nvrtcGetCUBIN");
  resolve(api->ltoir_size, "nvrtcGetLTOIRSize");
  resolve(api->ltoir, "nvrtcGetLTOIR");
  resolve(api->add_name_expression, "nvrtcAddNameExpression");
  resolve(api->lowered_name, "nvrtcGetLoweredName");
  // What only a caller forwarding the whole API needs (a front end): null when absent
  // (before NVRTC 12.4 for the PCH and flow-callback calls; __nvrtcCPEx is private).
  auto optional = [&](auto &fn, const char *name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
  };
  optional(api->num_supported_archs, "nvrtcGetNumSupportedArchs");
  optional(api->supported_archs, "nvrtcGetSupportedArchs");
  optional(api->optixir_size, "nvrtcGetOptiXIRSize");
  optional(api->optixir, "nvrtcGetOptiXIR");
  optional(api->get_pch_heap_size, "nvrtcGetPCHHeapSize");
  optional(api->set_pch_heap_size, "nvrtcSetPCHHeapSize");
  optional(api->pch_create_status, "nvrtcGetPCHCreateStatus");
  optional(api->pch_heap_size_required, "nvrtcGetPCHHeapSizeRequired");
  optional(api->set_flow_callback, "nvrtcSetFlowCallback");
  optional(api->create_ex, "__nvrtcCPEx");
  if (missing) {
    ::dlclose(h);
    throw Error(Status::cuda_unavailable,
                "NVRTC '" + where.path + "' lacks " + missing_name + " (too old or not NVRTC)");
  }
  int major = 0, minor = 0;
  if (api->version(&major, &minor) != NVRTC_SUCCESS) {
    ::dlclose(h);
    throw Error(Status::cuda_unavailable, "nvrtcVersion failed in '" + where.path + "'");
  }
  std::unique_ptr<Nvrtc> n(new Nvrtc());
  n->api_ = std::move(api);
  n->version_ = uint32_t(major) * 1000 + uint32_t(minor) * 10;
  n->path_ = where.path;
  return *loaded.emplace(where.path, std::move(n)).first->second;
}

NvrtcOutput Nvrtc::compile(const ProgramDesc &p) const {
  if (p.code_type != CodeType::cxx)
    throw Error(Status::unsupported,
                "NVRTC compiles CUDA C++ only (PTX and NVVM IR go to "
                "nvJitLink and libNVVM: core/jit_tools.hpp)");
  NvrtcOutput out;
  try {
    compile_into(p, out);
  } catch (const ApiFailure &f) {
    // Any NVRTC call that refused the program (an invalid option, a bad name expression) fails
    // the compile like a compile error: a result whose log holds NVRTC's log and the call.
    if (!out.log.empty() && out.log.back() != '\n') out.log += '\n';
    out.log += "progcache: " + f.what + "\n";
    out.ok = false;
    out.code.clear();
    out.lowered_names.clear();
  }
  return out;
}

void Nvrtc::compile_into(const ProgramDesc &p, NvrtcOutput &out) const {
  const NvrtcApi &a = *api_;
  auto check = [&](nvrtcResult r, const char *what) {
    if (r == NVRTC_SUCCESS) return;
    if (r == NVRTC_ERROR_OUT_OF_MEMORY)
      throw Error(Status::no_memory, std::string(what) + ": " + a.error_string(r));
    out.nvrtc_result = int32_t(r);
    throw ApiFailure{std::string(what) + " returned " + a.error_string(r)};
  };
  const std::string source(p.source.str());  // NVRTC wants it NUL-terminated
  const std::string name(p.name);
  std::vector<std::string> header_names, header_sources;
  for (const auto &[n, s] : p.headers) {
    header_names.emplace_back(n);
    header_sources.emplace_back(s);
  }
  std::vector<const char *> hn, hs, opts;
  for (auto &s : header_names) hn.push_back(s.c_str());
  for (auto &s : header_sources) hs.push_back(s.c_str());
  std::vector<std::string> options(p.options.begin(), p.options.end());
  if (p.target == Target::ltoir) {
    bool has_dlto = false;
    for (const std::string &o : options) has_dlto |= o == "-dlto" || o == "--dlink-time-opt";
    if (!has_dlto) options.push_back("-dlto");
  }
  for (auto &s : options) opts.push_back(s.c_str());

  nvrtcProgram prog = nullptr;
  check(a.create(&prog, source.c_str(), name.c_str(), int(hn.size()), hs.data(), hn.data()),
        "nvrtcCreateProgram");
  struct Destroy {
    const NvrtcApi &a;
    nvrtcProgram *p;
    ~Destroy() { a.destroy(p); }
  } destroy{a, &prog};
  std::vector<std::string> exprs(p.name_expressions.begin(), p.name_expressions.end());
  for (const std::string &e : exprs)
    check(a.add_name_expression(prog, e.c_str()), "nvrtcAddNameExpression");

  const auto t0 = std::chrono::steady_clock::now();
  const nvrtcResult rc = a.compile(prog, int(opts.size()), opts.data());
  out.compile_us = uint64_t(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count());
  size_t log_size = 0;
  if (a.log_size(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out.log.resize(log_size);
    a.log(prog, out.log.data());
    out.log.resize(log_size - 1);
  }
  if (rc != NVRTC_SUCCESS) {
    if (rc != NVRTC_ERROR_COMPILATION) check(rc, "nvrtcCompileProgram");
    out.nvrtc_result = int32_t(rc);
    return;  // ok = false; the log says why
  }
  size_t size = 0;
  switch (p.target) {
    case Target::nvrtc_outputs:
      throw Error(Status::unsupported,
                  "every output of a compile is collected by the front end that asks for it");
    case Target::cubin:
      check(a.cubin_size(prog, &size), "nvrtcGetCUBINSize");
      out.code.resize(size);
      if (size) check(a.cubin(prog, out.code.data()), "nvrtcGetCUBIN");
      break;
    case Target::ptx:
      check(a.ptx_size(prog, &size), "nvrtcGetPTXSize");
      out.code.resize(size);
      if (size) check(a.ptx(prog, out.code.data()), "nvrtcGetPTX");
      if (size <= 1) out.code.clear();  // only the terminating NUL: no PTX at all
      break;
    case Target::ltoir:
      check(a.ltoir_size(prog, &size), "nvrtcGetLTOIRSize");
      out.code.resize(size);
      if (size) check(a.ltoir(prog, out.code.data()), "nvrtcGetLTOIR");
      break;
  }
  if (out.code.empty()) {
    // Success without output is not a binary: a compile error, never stored.
    static const char *const kWhy[] = {
        "no cubin: give a real architecture (-arch=sm_XX), not a virtual one (compute_XX)",
        "no PTX: -dlto/--dlink-time-opt makes LTO-IR instead; ask for the LTO-IR target",
        "no LTO-IR: add -dlto"};
    if (!out.log.empty() && out.log.back() != '\n') out.log += '\n';
    out.log += std::string("progcache: NVRTC succeeded but produced ") + kWhy[int(p.target)] + "\n";
    return;  // ok = false
  }
  for (const std::string &e : exprs) {
    const char *lowered = nullptr;
    check(a.lowered_name(prog, e.c_str(), &lowered), "nvrtcGetLoweredName");
    out.lowered_names.emplace_back(e, lowered ? lowered : "");
  }
  out.ok = true;
}

}  // namespace progcache
