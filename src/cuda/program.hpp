// A program as the JIT libraries take it: everything the caller gives pcache_compile or
// pcache_link, borrowed (the views point into the caller's memory for the duration of a call).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/blob.hpp"

namespace progcache {

struct ParsedOptions;  // core/key.hpp

// cxx: CUDA C++ through NVRTC; ptx: PTX to cubin through nvJitLink; nvvm: NVVM IR through
// libNVVM; link (internal, pcache_link): the program's link_inputs through nvJitLink.
enum class CodeType : int32_t { cxx = 0, ptx = 1, nvvm = 2, link = 3 };
// What nvJitLink links (pcache_link_input.kind: PCACHE_INPUT_*).
enum class LinkInputKind : int32_t {
  cubin = 0,
  ptx = 1,
  ltoir = 2,
  fatbin = 3,
  object = 4,
  library = 5
};
struct LinkInput {
  LinkInputKind kind = LinkInputKind::cubin;
  std::string_view name;
  ByteView data;
};
// nvrtc_outputs is internal (never accepted from the C API): the entries of a front end that
// answers NVRTC's getters itself, whose payload holds every output of the compile in the front
// end's own encoding, keyed apart from the rest.
enum class Target : int32_t { cubin = 0, ptx = 1, ltoir = 2, nvrtc_outputs = 3 };

struct ProgramDesc {
  std::string_view name = "default_program";
  CodeType code_type = CodeType::cxx;
  Target target = Target::cubin;
  uint32_t nvrtc_version = 0;
  ByteView source;
  std::vector<std::string_view> options;
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  std::vector<std::string_view> name_expressions;
  std::optional<ByteView> extra_digest;
  // code_type link: what is linked, in order. (nvvm: the extra modules are the headers, each a
  // module's name and bytes, text or bitcode.)
  std::vector<LinkInput> link_inputs;
  // The source's digest, computed once per call and shared by the include manifest and the key
  // (core/key.cpp: source_digest); empty until then.
  mutable std::optional<std::array<uint8_t, 32>> source_digest;
  // The options parsed (core/key.cpp: program_options), likewise once per call.
  mutable std::shared_ptr<const ParsedOptions> parsed_options;
};

}  // namespace progcache
