// The entry format: the self-describing byte string every backend stores.
//
//   offset  size  field
//   0       4     magic "PCEN"
//   4       2     format version (kEntryFormatVersion)
//   6       2     flags: bit 0 = bytes 48..63 hold a MAC
//   8       4     key size
//   12      4     metadata size
//   16      8     payload size
//   24      4     padding size: zero bytes after the metadata so the payload starts on a
//                 16-byte boundary of the record
//   28      4     reserved (0)
//   32      16    XXH3-128 checksum, seeded with XXH3-64 of bytes [0, 32), over key|meta|payload
//   48      16    MAC when flag bit 0 is set (keyed BLAKE2b-128 over the same bytes as the
//                 checksum), else 0
//   64      ...   key, metadata, padding, payload
//
// The checksum detects damage (torn writes, bit rot, truncation); it is not a defence against a
// deliberate forger. The MAC is: with a secret configured, every entry is signed and every read
// from storage checked (see docs/security.md). XXH3 runs at memory speed, so verifying every read
// costs a few percent of the read itself, where a cryptographic hash would cost several times it.
#pragma once

#include <optional>
#include <string>

#include "blob.hpp"

namespace progcache {

inline constexpr size_t kEntryHeaderSize = 64;
inline constexpr uint16_t kEntryFormatVersion = 1;

// A secret for entry MACs (BLAKE2BMAC keyed with BLAKE2b-512 of the secret).
class MacKey {
 public:
  explicit MacKey(ByteView secret);
  // 16-byte MAC over header bytes [0, 32) and the body.
  void sign(const uint8_t *record, size_t body_size, uint8_t out[16]) const;

 private:
  uint8_t key_[64];
};

// Builds the record for (key, meta, payload), signed when mac is not null.
Blob encode_entry(ByteView key, ByteView meta, ByteView payload, const MacKey *mac = nullptr);

struct EntryParts {
  ByteView key;
  ByteView meta;
  ByteView payload;
  size_t payload_offset = 0;
};

// Parses the header fields without verifying the checksum; nullopt (with *why) if malformed.
std::optional<EntryParts> parse_entry(ByteView record, std::string *why);

// Parses and verifies a record read back for expected_key: structure, key equality and (when
// verify_checksum) the checksum and, when mac is not null, the MAC (an unsigned entry fails).
// nullopt with *why set if anything is wrong.
std::optional<EntryParts> decode_entry(ByteView record, ByteView expected_key, bool verify_checksum,
                                       std::string *why, const MacKey *mac = nullptr);

// Reads the payload size from a header prefix of at least kEntryHeaderSize bytes (0 if bad).
std::optional<uint64_t> entry_payload_size(ByteView header);

}  // namespace progcache
