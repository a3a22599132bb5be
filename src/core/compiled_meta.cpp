#include "core/compiled_meta.hpp"

#include <cstring>

#include "util/byte_io.hpp"

namespace progcache {
namespace {

constexpr char kMagic[4] = {'P', 'C', 'M', '1'};
enum Tag : uint8_t {
  kTarget = 1,
  kNvrtcVersion,
  kCompileUs,
  kProgramName,
  kLog,
  kLoweredName,
  kKeyField,
  kFailure,  // written only for a failed compile: readers that skip it never see one (schema 4)
  kIdentity,
};

// One record: a tag byte, then the value as a u32 length and its bytes.
void record(ByteWriter &out, uint8_t tag, std::string_view value) {
  out.u8(tag);
  out.str(value);
}
void record_u32(ByteWriter &out, uint8_t tag, uint32_t value) {
  ByteWriter v;
  v.u32(value);
  record(out, tag, v.data());
}
// A pair inside one value: the first as a u32 length and its bytes, the second to the end.
std::string pair_value(const std::string &a, const std::string &b) {
  ByteWriter v;
  v.str(a);
  v.bytes(b);
  return v.take();
}
std::optional<std::pair<std::string_view, std::string_view>> split_pair(std::string_view v) {
  ByteReader r(v);
  const std::string_view first = r.str();
  const std::string_view second = r.rest();
  if (!r.done()) return std::nullopt;
  return std::make_pair(first, second);
}
// A fixed-size number value: exactly size bytes.
std::optional<uint64_t> number_value(std::string_view v, size_t size) {
  if (v.size() != size) return std::nullopt;
  return load_le(reinterpret_cast<const uint8_t *>(v.data()), int(size));
}

}  // namespace

std::string encode_meta(const CompiledMeta &m) {
  ByteWriter out;
  out.bytes(std::string_view(kMagic, 4));
  record_u32(out, kTarget, uint32_t(m.target));
  record_u32(out, kNvrtcVersion, m.nvrtc_version);
  ByteWriter us;
  us.u64(m.compile_us);
  record(out, kCompileUs, us.data());
  record(out, kProgramName, m.program_name);
  record(out, kLog, m.log);
  for (const auto &[e, s] : m.lowered_names) record(out, kLoweredName, pair_value(e, s));
  for (const auto &[f, d] : m.key_fields) record(out, kKeyField, pair_value(f, d));
  if (!m.identity.empty()) record(out, kIdentity, m.identity);
  if (m.failure != 0) record_u32(out, kFailure, uint32_t(m.failure));
  return out.take();
}

std::optional<CompiledMeta> decode_meta(ByteView bytes, KeyFields key_fields) {
  ByteReader r(bytes.str());
  if (r.bytes(4) != std::string_view(kMagic, 4)) return std::nullopt;
  CompiledMeta m;
  while (!r.failed() && !r.done()) {
    const uint8_t tag = r.u8();
    const std::string_view v = r.str();
    if (r.failed()) return std::nullopt;
    switch (tag) {
      case kTarget: {
        const auto n = number_value(v, 4);
        if (!n) return std::nullopt;
        m.target = int32_t(*n);
        break;
      }
      case kNvrtcVersion: {
        const auto n = number_value(v, 4);
        if (!n) return std::nullopt;
        m.nvrtc_version = uint32_t(*n);
        break;
      }
      case kCompileUs: {
        const auto n = number_value(v, 8);
        if (!n) return std::nullopt;
        m.compile_us = *n;
        break;
      }
      case kProgramName:
        m.program_name = std::string(v);
        break;
      case kLog:
        m.log = std::string(v);
        break;
      case kIdentity:
        m.identity = std::string(v);
        break;
      case kFailure: {
        const auto n = number_value(v, 4);
        if (!n || *n == 0) return std::nullopt;
        m.failure = int32_t(*n);
        break;
      }
      case kLoweredName:
      case kKeyField: {
        const auto p = split_pair(v);
        if (!p) return std::nullopt;
        if (tag == kKeyField && key_fields == KeyFields::checked_only) break;
        (tag == kLoweredName ? m.lowered_names : m.key_fields).emplace_back(p->first, p->second);
        break;
      }
      default:  // a newer writer's field: skipped
        break;
    }
  }
  if (r.failed()) return std::nullopt;
  return m;
}

}  // namespace progcache
