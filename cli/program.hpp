// The program compile, deps and explain describe: FILE (CUDA C++; .ptx: PTX for nvJitLink; .ll or
// .bc: NVVM IR for libNVVM) and the compile options, as a pcache_program (cli/program.cpp).
#pragma once

#include <string>
#include <vector>

#include "cli.hpp"

namespace progcache::cli {

// The options compile, deps and explain share, for the command table.
std::vector<OptionSpec> compile_options();

// Owns the strings a pcache_program points at.
class Program {
 public:
  explicit Program(const Invocation &in);
  const pcache_program &get() const { return program_; }
  const std::string &file() const { return file_; }
  const std::string &target_name() const { return target_; }
  const std::vector<std::string> &name_expressions() const { return expressions_; }
  // "NVRTC", "nvJitLink" or "libNVVM": what compiles it.
  const char *library() const;

 private:
  std::string file_, source_, target_;
  std::vector<std::string> options_, expressions_;
  std::vector<const char *> option_pointers_, expression_pointers_;
  // NVVM IR: the extra modules (--module FILE), read whole (bitcode holds NULs).
  std::vector<std::string> module_names_, module_sources_;
  std::vector<const char *> module_name_pointers_, module_source_pointers_;
  std::vector<size_t> module_sizes_;
  pcache_program program_{};
};

}  // namespace progcache::cli
