// The programs NVRTC does not compile: PTX (to a cubin through nvJitLink), NVVM IR (through
// libNVVM) and links (nvJitLink). What keys them besides the program (the library's exact build,
// libdevice's digest), and running the library on a miss. The compile flow around them (lookup,
// single flight, storing) is the NVRTC path's (core/compile.cpp); nothing here is observed:
// every input is in the program, or a file whose digest is keyed.
#pragma once

#include <cstdint>
#include <functional>

#include "core/key.hpp"
#include "cuda/nvrtc.hpp"
#include "cuda/program.hpp"
#include "util/memo_store.hpp"

namespace progcache {

// progcache's own option for NVVM programs: link libdevice lazily (as cuda.core's use_libdevice).
// It is keyed with libdevice's digest and never passed to libNVVM.
inline constexpr std::string_view kUseLibdevice = "-use-libdevice";

// The key context of a non-C++ program: the build of the library that would run it and, for an
// NVVM program that asks for libdevice, the file and its digest (a hit reads neither library).
// Throws Error(cuda_unavailable) when the library (or a libdevice asked for) is not found.
KeyContext jit_key_context(const ProgramDesc &program, MemoStore *memos);

struct JitRun {
  NvrtcOutput out;
  uint32_t version = 0;  // the library's, as CUDA_VERSION
  KeyContext context;    // what was run: the loaded build, the libdevice bytes used
};
// "nvJitLink" or "libNVVM": which library runs a non-C++ program.
const char *jit_library_name(const ProgramDesc &program);
// A front end's own run of the program (CompileOptions::runner): it loads the library itself.
using JitRunner = std::function<NvrtcOutput(const ProgramDesc &)>;
// Runs the program's library (loading it), or runner when one is given. Throws
// Error(cuda_unavailable) when it cannot be loaded, Error(no_memory).
JitRun run_jit(const ProgramDesc &program, MemoStore *memos, const JitRunner &runner = {});

}  // namespace progcache
