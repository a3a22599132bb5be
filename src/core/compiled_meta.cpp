#include "core/compiled_meta.hpp"

#include <cstring>

#include "util/endian.hpp"

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

void put_u32(std::string &out, uint32_t v) {
  append_le(out, v, 4);
}
void put_u64(std::string &out, uint64_t v) {
  append_le(out, v, 8);
}
void record(std::string &out, uint8_t tag, std::string_view value) {
  out.push_back(char(tag));
  put_u32(out, uint32_t(value.size()));
  out.append(value);
}
std::string pair_value(const std::string &a, const std::string &b) {
  std::string v;
  put_u32(v, uint32_t(a.size()));
  v += a;
  v += b;
  return v;
}

}  // namespace

std::string encode_meta(const CompiledMeta &m) {
  std::string out(kMagic, 4);
  std::string v;
  put_u32(v, uint32_t(m.target));
  record(out, kTarget, v);
  v.clear();
  put_u32(v, m.nvrtc_version);
  record(out, kNvrtcVersion, v);
  v.clear();
  put_u64(v, m.compile_us);
  record(out, kCompileUs, v);
  record(out, kProgramName, m.program_name);
  record(out, kLog, m.log);
  for (const auto &[e, s] : m.lowered_names) record(out, kLoweredName, pair_value(e, s));
  for (const auto &[f, d] : m.key_fields) record(out, kKeyField, pair_value(f, d));
  if (!m.identity.empty()) record(out, kIdentity, m.identity);
  if (m.failure != 0) {
    v.clear();
    put_u32(v, uint32_t(m.failure));
    record(out, kFailure, v);
  }
  return out;
}

std::optional<CompiledMeta> decode_meta(ByteView bytes) {
  if (bytes.size < 4 || std::memcmp(bytes.data, kMagic, 4) != 0) return std::nullopt;
  CompiledMeta m;
  size_t pos = 4;
  auto split_pair = [](std::string_view v) -> std::optional<std::pair<std::string, std::string>> {
    if (v.size() < 4) return std::nullopt;
    const uint64_t n = load_le(reinterpret_cast<const uint8_t *>(v.data()), 4);
    if (n > v.size() - 4) return std::nullopt;
    return std::make_pair(std::string(v.substr(4, n)), std::string(v.substr(4 + n)));
  };
  while (pos < bytes.size) {
    if (bytes.size - pos < 5) return std::nullopt;
    const uint8_t tag = bytes.data[pos];
    const uint64_t len = load_le(bytes.data + pos + 1, 4);
    pos += 5;
    if (len > bytes.size - pos) return std::nullopt;
    const std::string_view v(reinterpret_cast<const char *>(bytes.data + pos), len);
    const auto *u = reinterpret_cast<const uint8_t *>(v.data());
    pos += len;
    switch (tag) {
      case kTarget:
        if (len != 4) return std::nullopt;
        m.target = int32_t(load_le(u, 4));
        break;
      case kNvrtcVersion:
        if (len != 4) return std::nullopt;
        m.nvrtc_version = uint32_t(load_le(u, 4));
        break;
      case kCompileUs:
        if (len != 8) return std::nullopt;
        m.compile_us = load_le(u, 8);
        break;
      case kProgramName:
        m.program_name = std::string(v);
        break;
      case kLog:
        m.log = std::string(v);
        break;
      case kIdentity:
        m.identity = std::string(v);
        break;
      case kFailure:
        if (len != 4) return std::nullopt;
        m.failure = int32_t(load_le(u, 4));
        if (m.failure == 0) return std::nullopt;
        break;
      case kLoweredName:
      case kKeyField: {
        auto p = split_pair(v);
        if (!p) return std::nullopt;
        (tag == kLoweredName ? m.lowered_names : m.key_fields).push_back(std::move(*p));
        break;
      }
      default:  // a newer writer's field: skipped
        break;
    }
  }
  return m;
}

}  // namespace progcache
