// Every output of one NVRTC compile, as the getters answered them: the payload of a drop-in entry
// (target "nvrtc"). A hit replays these answers, so each getter returns what it returned after
// the real compile: the same status, the same size, the same bytes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dropin_common/support.hpp"
#include "util/blob.hpp"

namespace progcache::dropin {

// The four outputs NVRTC 13 can have, in payload order.
enum class OutputKind : int { ptx = 0, cubin = 1, ltoir = 2, optixir = 3 };
inline constexpr int kOutputKinds = 4;

struct CompileOutputs {
  OutputSlot slots[kOutputKinds];
  // After a refused compile: what nvrtcGetLoweredName answers for any name (NVRTC has lowered
  // none); unused after a success, whose lowered names the entry's metadata holds.
  int32_t lowered_result = 0;
  const OutputSlot &operator[](OutputKind k) const { return slots[int(k)]; }
  OutputSlot &operator[](OutputKind k) { return slots[int(k)]; }
};

std::string encode_outputs(const CompileOutputs &outputs);
// nullopt when the bytes are not a payload this version wrote (a drop-in entry from a future
// format, or damage the entry's checksum could not see): the caller compiles instead.
std::optional<CompileOutputs> decode_outputs(ByteView payload);

}  // namespace progcache::dropin
