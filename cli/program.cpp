// FILE.cu and compile options as the pcache_program that compile, deps and explain pass on.
#include "program.hpp"

namespace progcache::cli {

std::vector<OptionSpec> compile_options() {
  return {
      {"arch", 0, "SM",
       "the GPU architecture (-arch=SM); cubin targets default to sm_90 when no NVRTC option "
       "after -- names one"},
      {"target", 0, "cubin|ptx|ltoir", "what to produce (default cubin)"},
      {"name-expression", 0, "EXPR",
       "a __global__ function template instantiation to name (repeatable); its lowered name is "
       "printed"},
  };
}

Program::Program(const Invocation &in)
    : file_(in.args.at(0)), target_(in.value("target", "cubin")) {
  if (target_ != "cubin" && target_ != "ptx" && target_ != "ltoir")
    throw Usage("--target must be cubin, ptx or ltoir, not '" + target_ + "'");
  source_ = read_file(file_);
  const std::string arch = in.value("arch");
  std::vector<const char *> given;
  for (const std::string &o : in.passthrough) given.push_back(o.c_str());
  int32_t names_arch = 0;
  check(pcache_admin_options_name_arch(given.data(), given.size(), &names_arch));
  if (!arch.empty() || (!names_arch && target_ == "cubin"))
    options_.push_back("-arch=" + (arch.empty() ? std::string("sm_90") : arch));
  options_.insert(options_.end(), in.passthrough.begin(), in.passthrough.end());
  if (in.options.count("name-expression")) expressions_ = in.options.at("name-expression");
  for (const std::string &o : options_) option_pointers_.push_back(o.c_str());
  for (const std::string &e : expressions_) expression_pointers_.push_back(e.c_str());
  check(pcache_program_init(&program_, sizeof program_));
  // The file's path as given: NVRTC resolves its quoted includes against the path's directory,
  // as a compiler run on the file would.
  program_.name = file_.c_str();
  program_.source = source_.data();
  program_.source_size = source_.size();
  program_.code_type = PCACHE_CODE_CXX;
  program_.target = target_ == "ptx"     ? PCACHE_TARGET_PTX
                    : target_ == "ltoir" ? PCACHE_TARGET_LTOIR
                                         : PCACHE_TARGET_CUBIN;
  program_.options = option_pointers_.data();
  program_.num_options = option_pointers_.size();
  program_.name_expressions = expression_pointers_.data();
  program_.num_name_expressions = expression_pointers_.size();
}

}  // namespace progcache::cli
