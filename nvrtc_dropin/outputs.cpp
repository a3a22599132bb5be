#include "outputs.hpp"

#include "util/byte_io.hpp"

namespace progcache::dropin {
namespace {
// "PNO2": progcache NVRTC outputs, version 2 (1 had no flags: every size was written).
constexpr std::string_view kMagic = "PNO2";
}  // namespace

std::string encode_outputs(const CompileOutputs &outputs) {
  ByteWriter w;
  w.bytes(kMagic);
  for (const OutputSlot &slot : outputs.slots) write_slot(w, slot);
  w.u32(uint32_t(outputs.lowered_result));
  return w.take();
}

std::optional<CompileOutputs> decode_outputs(ByteView payload) {
  ByteReader r(payload.str());
  if (r.bytes(kMagic.size()) != kMagic) return std::nullopt;
  CompileOutputs outputs;
  for (OutputSlot &slot : outputs.slots) read_slot(r, &slot);
  outputs.lowered_result = int32_t(r.u32());
  if (!r.done()) return std::nullopt;
  return outputs;
}

}  // namespace progcache::dropin
