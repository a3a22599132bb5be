// FILE.cu and compile options as the pcache_program that compile, deps and explain pass on.
#include "program.hpp"

namespace progcache::cli {

namespace {

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int32_t code_type_of(const std::string &file) {
  if (ends_with(file, ".ptx")) return PCACHE_CODE_PTX;
  if (ends_with(file, ".ll") || ends_with(file, ".bc")) return PCACHE_CODE_NVVM;
  return PCACHE_CODE_CXX;
}

// Whether nvJitLink's or libNVVM's options name an architecture (-arch=X or -arch X).
bool names_arch(const std::vector<std::string> &options) {
  for (const std::string &o : options)
    if (o == "-arch" || o.compare(0, 6, "-arch=") == 0) return true;
  return false;
}

}  // namespace

std::vector<OptionSpec> compile_options() {
  return {
      {"arch", 0, "SM",
       "the GPU architecture (-arch=SM; compute_XX for NVVM IR); cubin targets default to "
       "sm_90 when no option after -- names one"},
      {"target", 0, "cubin|ptx|ltoir",
       "what to produce (default cubin; ptx for NVVM IR, which makes ptx or ltoir)"},
      {"name-expression", 0, "EXPR",
       "a __global__ function template instantiation to name (repeatable); its lowered name is "
       "printed"},
      {"module", 0, "FILE",
       "NVVM IR: another module to link in, in order (repeatable; text or bitcode)"},
  };
}

Program::Program(const Invocation &in) : file_(in.args.at(0)) {
  const int32_t code_type = code_type_of(file_);
  target_ = in.value("target", code_type == PCACHE_CODE_NVVM ? "ptx" : "cubin");
  if (target_ != "cubin" && target_ != "ptx" && target_ != "ltoir")
    throw Usage("--target must be cubin, ptx or ltoir, not '" + target_ + "'");
  source_ = read_file(file_);
  std::string arch = in.value("arch");
  bool has_arch = false;
  if (code_type == PCACHE_CODE_CXX) {
    std::vector<const char *> given;
    for (const std::string &o : in.passthrough) given.push_back(o.c_str());
    int32_t names = 0;
    check(pcache_admin_options_name_arch(given.data(), given.size(), &names));
    has_arch = names != 0;
  } else {
    has_arch = names_arch(in.passthrough);
  }
  if (code_type == PCACHE_CODE_NVVM && arch.compare(0, 3, "sm_") == 0)
    arch = "compute_" + arch.substr(3);  // libNVVM names virtual architectures
  const char *default_arch = code_type == PCACHE_CODE_NVVM ? "compute_90" : "sm_90";
  if (!arch.empty() || (!has_arch && (target_ == "cubin" || code_type == PCACHE_CODE_NVVM)))
    options_.push_back("-arch=" + (arch.empty() ? std::string(default_arch) : arch));
  options_.insert(options_.end(), in.passthrough.begin(), in.passthrough.end());
  if (in.options.count("name-expression")) expressions_ = in.options.at("name-expression");
  if (in.options.count("module")) {
    if (code_type != PCACHE_CODE_NVVM) throw Usage("--module is for NVVM IR (.ll or .bc) only");
    module_names_ = in.options.at("module");
  }
  for (const std::string &m : module_names_) module_sources_.push_back(read_file(m));
  for (size_t i = 0; i < module_names_.size(); ++i) {
    module_name_pointers_.push_back(module_names_[i].c_str());
    module_source_pointers_.push_back(module_sources_[i].c_str());
    module_sizes_.push_back(module_sources_[i].size());
  }
  for (const std::string &o : options_) option_pointers_.push_back(o.c_str());
  for (const std::string &e : expressions_) expression_pointers_.push_back(e.c_str());
  check(pcache_program_init(&program_, sizeof program_));
  // The file's path as given: NVRTC resolves its quoted includes against the path's directory,
  // as a compiler run on the file would.
  program_.name = file_.c_str();
  program_.source = source_.data();
  program_.source_size = source_.size();
  program_.code_type = code_type;
  program_.target = target_ == "ptx"     ? PCACHE_TARGET_PTX
                    : target_ == "ltoir" ? PCACHE_TARGET_LTOIR
                                         : PCACHE_TARGET_CUBIN;
  program_.options = option_pointers_.data();
  program_.num_options = option_pointers_.size();
  program_.name_expressions = expression_pointers_.data();
  program_.num_name_expressions = expression_pointers_.size();
  program_.header_names = module_name_pointers_.data();
  program_.header_sources = module_source_pointers_.data();
  program_.header_sizes = module_sizes_.data();
  program_.num_headers = module_name_pointers_.size();
}

const char *Program::library() const {
  return program_.code_type == PCACHE_CODE_PTX    ? "nvJitLink"
         : program_.code_type == PCACHE_CODE_NVVM ? "libNVVM"
                                                  : "NVRTC";
}

}  // namespace progcache::cli
