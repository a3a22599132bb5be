#include "outputs.hpp"

#include "util/endian.hpp"

namespace progcache::dropin {
namespace {
constexpr uint32_t kMagic = 0x314f4e50;  // "PNO1": progcache NVRTC outputs, version 1
}

std::string encode_outputs(const CompileOutputs &outputs) {
  std::string out;
  append_le(out, kMagic, 4);
  for (const OutputSlot &slot : outputs.slots) {
    append_le(out, uint32_t(slot.size_result), 4);
    append_le(out, uint32_t(slot.data_result), 4);
    append_le(out, slot.bytes.size(), 8);
    out += slot.bytes;
  }
  return out;
}

std::optional<CompileOutputs> decode_outputs(ByteView payload) {
  const uint8_t *p = payload.data;
  size_t left = payload.size;
  auto take = [&](int n) -> std::optional<uint64_t> {
    if (left < size_t(n)) return std::nullopt;
    const uint64_t v = load_le(p, n);
    p += n;
    left -= size_t(n);
    return v;
  };
  if (take(4) != kMagic) return std::nullopt;
  CompileOutputs outputs;
  for (OutputSlot &slot : outputs.slots) {
    const auto size_result = take(4), data_result = take(4), size = take(8);
    if (!size_result || !data_result || !size || *size > left) return std::nullopt;
    slot.size_result = int32_t(uint32_t(*size_result));
    slot.data_result = int32_t(uint32_t(*data_result));
    slot.bytes.assign(reinterpret_cast<const char *>(p), size_t(*size));
    p += *size;
    left -= size_t(*size);
  }
  if (left != 0) return std::nullopt;
  return outputs;
}

}  // namespace progcache::dropin
