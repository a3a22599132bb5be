// Metadata section: any bytes. Never crashes; what decodes round-trips through encode; a hit's
// decode (key fields checked, not kept) refuses exactly what the full decode refuses and agrees
// with it on every other field.
#include "core/compiled_meta.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto meta = decode_meta(ByteView(data, size));
  auto hit = decode_meta(ByteView(data, size), KeyFields::checked_only);
  if (bool(meta) != bool(hit)) __builtin_trap();
  if (!meta) return 0;
  if (!hit->key_fields.empty() || hit->log != meta->log ||
      hit->lowered_names != meta->lowered_names || hit->compile_us != meta->compile_us ||
      hit->target != meta->target || hit->nvrtc_version != meta->nvrtc_version ||
      hit->program_name != meta->program_name || hit->failure != meta->failure ||
      hit->identity != meta->identity)
    __builtin_trap();
  const std::string encoded = encode_meta(*meta);
  auto again = decode_meta(std::string_view(encoded));
  if (!again || again->log != meta->log || again->lowered_names != meta->lowered_names ||
      again->key_fields != meta->key_fields || again->compile_us != meta->compile_us ||
      again->target != meta->target || again->nvrtc_version != meta->nvrtc_version ||
      again->program_name != meta->program_name)
    __builtin_trap();
  return 0;
}
