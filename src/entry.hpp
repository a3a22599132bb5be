// The entry format: the self-describing byte string every backend stores.
//
//   offset  size  field
//   0       4     magic "PCEN"
//   4       2     format version (kEntryFormatVersion)
//   6       2     flags (reserved, 0)
//   8       4     key size
//   12      4     metadata size
//   16      8     payload size
//   24      4     padding size: zero bytes after the metadata so the payload starts on a
//                 16-byte boundary of the record
//   28      4     reserved (0)
//   32      16    XXH3-128 checksum, seeded with XXH3-64 of bytes [0, 32), over key|meta|payload
//   48      16    reserved (0)
//   64      ...   key, metadata, padding, payload
//
// The checksum detects damage (torn writes, bit rot, truncation); it is not a defence against a
// deliberate forger (see docs/security.md). XXH3 runs at memory speed, so verifying every read
// costs a few percent of the read itself, where a cryptographic hash would cost several times it.
#pragma once

#include <optional>
#include <string>

#include "blob.hpp"

namespace progcache {

inline constexpr size_t kEntryHeaderSize = 64;
inline constexpr uint16_t kEntryFormatVersion = 1;

// Builds the record for (key, meta, payload).
Blob encode_entry(ByteView key, ByteView meta, ByteView payload);

struct EntryParts {
  ByteView key;
  ByteView meta;
  ByteView payload;
  size_t payload_offset = 0;
};

// Parses the header fields without verifying the checksum; nullopt (with *why) if malformed.
std::optional<EntryParts> parse_entry(ByteView record, std::string *why);

// Parses and verifies a record read back for expected_key: structure, key equality and (when
// verify_checksum) the checksum. nullopt with *why set if anything is wrong.
std::optional<EntryParts> decode_entry(ByteView record, ByteView expected_key, bool verify_checksum,
                                       std::string *why);

// Reads the payload size from a header prefix of at least kEntryHeaderSize bytes (0 if bad).
std::optional<uint64_t> entry_payload_size(ByteView header);

}  // namespace progcache
