// The metadata section of a compiled entry: what a hit needs to answer exactly like a fresh
// compile (lowered names, log, target, NVRTC version) and what `progcache explain` compares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "util/blob.hpp"

namespace progcache {

struct CompiledMeta {
  int32_t target = 0;
  uint32_t nvrtc_version = 0;
  uint64_t compile_us = 0;  // how long the original compile took
  std::string program_name;
  std::string log;
  std::vector<std::pair<std::string, std::string>> lowered_names;  // expression -> symbol
  std::vector<std::pair<std::string, std::string>> key_fields;     // see key_fields()
  // A compile NVRTC refused (stored so that a warm start answers as a cold one): the
  // nvrtcResult it returned; the payload is empty, or the drop-in's outputs. 0 for a success.
  int32_t failure = 0;
  // The program's identity (core/key.hpp: identity_key), under which the observations of NVRTC
  // that lead to this entry are filed: a bundle carries them along (core/bundle.cpp).
  std::string identity;
};

std::string encode_meta(const CompiledMeta &meta);
// What decode_meta makes of the key fields: a hit answers without them (they are for `progcache
// explain` and the entry accessors), and making their strings was a third of a drop-in hit's
// decode. Malformed ones fail the decode either way.
enum class KeyFields { decoded, checked_only };
// nullopt for an empty or malformed section (unknown tags are skipped, for forward compatibility).
std::optional<CompiledMeta> decode_meta(ByteView bytes, KeyFields key_fields = KeyFields::decoded);

}  // namespace progcache
