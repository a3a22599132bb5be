// Metadata section: any bytes. Never crashes; what decodes round-trips through encode.
#include "core/compiled_meta.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto meta = decode_meta(ByteView(data, size));
  if (!meta) return 0;
  const std::string encoded = encode_meta(*meta);
  auto again = decode_meta(std::string_view(encoded));
  if (!again || again->log != meta->log || again->lowered_names != meta->lowered_names ||
      again->key_fields != meta->key_fields || again->compile_us != meta->compile_us ||
      again->target != meta->target || again->nvrtc_version != meta->nvrtc_version ||
      again->program_name != meta->program_name)
    __builtin_trap();
  return 0;
}
