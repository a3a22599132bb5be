#include "outputs.hpp"

#include "util/byte_io.hpp"

namespace progcache::dropin {
namespace {
// "PNO2": progcache NVRTC outputs, version 2 (1 had no flags: every size was written).
constexpr std::string_view kMagic = "PNO2";
constexpr uint32_t kSizeWritten = 1;
}  // namespace

std::string encode_outputs(const CompileOutputs &outputs) {
  ByteWriter w;
  w.bytes(kMagic);
  for (const OutputSlot &slot : outputs.slots) {
    w.u32(uint32_t(slot.size_result));
    w.u32(uint32_t(slot.data_result));
    w.u32(slot.size_written ? kSizeWritten : 0);
    w.u64(slot.bytes.size());
    w.bytes(slot.bytes);
  }
  w.u32(uint32_t(outputs.lowered_result));
  return w.take();
}

std::optional<CompileOutputs> decode_outputs(ByteView payload) {
  ByteReader r(payload.str());
  if (r.bytes(kMagic.size()) != kMagic) return std::nullopt;
  CompileOutputs outputs;
  for (OutputSlot &slot : outputs.slots) {
    slot.size_result = int32_t(r.u32());
    slot.data_result = int32_t(r.u32());
    const uint32_t flags = r.u32();
    if (flags & ~kSizeWritten) r.fail();
    slot.size_written = flags & kSizeWritten;
    const uint64_t size = r.u64();
    slot.bytes = std::string(r.bytes(size > SIZE_MAX ? SIZE_MAX : size_t(size)));
  }
  outputs.lowered_result = int32_t(r.u32());
  if (!r.done()) return std::nullopt;
  return outputs;
}

}  // namespace progcache::dropin
