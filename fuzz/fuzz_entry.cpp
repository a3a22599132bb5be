// Entry parser: any bytes, any expected key. Never crashes; what decodes re-encodes identically
// (an unsigned entry: a signed one's MAC is rebuilt only with its writer's secret, and a reader
// without a secret reads it by its checksum); a compressed payload inflates to exactly its
// declared size or is refused.
#include <cstring>
#include <string>

#include "format/entry.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const size_t key_size = data[0] % 16 + 1;
  if (size < 1 + key_size) return 0;
  const ByteView key(data + 1, key_size);
  const ByteView record(data + 1 + key_size, size - 1 - key_size);
  std::string why;
  entry_payload_size(record);
  (void)parse_entry(record, &why);
  static const MacKey mac(std::string_view("fuzz secret"));
  (void)decode_entry(record, key, true, &why, &mac);
  if (auto parts = decode_entry(record, key, true, &why);
      parts && !parts->compressed && !parts->signed_with_mac) {
    Blob again = encode_entry(parts->key, parts->meta, parts->payload);
    if (again.size() != record.size || std::memcmp(again.data(), record.data, record.size) != 0)
      __builtin_trap();
  }
  // Without the checksum (which a forger can recompute), zstd sees the stored bytes as they are.
  if (auto parts = decode_entry(record, key, false, &why); parts && parts->compressed) {
    if (auto plain = inflate_entry(*parts, &why)) {
      auto p = parse_entry(plain->view(), &why);
      if (!p || p->compressed || p->payload.size != parts->payload_size) __builtin_trap();
    }
  }
  return 0;
}
