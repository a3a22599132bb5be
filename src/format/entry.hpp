// The entry format: the self-describing byte string every backend stores.
//
//   offset  size  field
//   0       4     magic "PCEN"
//   4       2     format version (kEntryFormatVersion)
//   6       2     flags: bit 0 = bytes 48..63 hold a MAC; bit 1 = the payload is stored as one
//                 zstd frame (the stored bytes run to the end of the record)
//   8       4     key size
//   12      4     metadata size
//   16      8     payload size (as the caller sees it: uncompressed)
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
// costs a few percent of the read itself, where a cryptographic hash would cost several times it
// (a store may vouch for a record found intact within the second and stored the same way since:
// Blob::vouched, docs/security.md "What a hit checks").
//
// Compression: the checksum and the MAC cover the stored (compressed) bytes, so damage and
// forgeries are caught before a byte is decompressed; the frame's declared content size must
// equal the header's payload size, which bounds what a hostile record can make a reader allocate.
// Readers of either kind of entry coexist: the flag, not the backend, says how to read it.
#pragma once

#include <optional>
#include <string>

#include "util/blob.hpp"

namespace progcache {

inline constexpr size_t kEntryHeaderSize = 64;
// The longest key an entry holds (PCACHE_MAX_KEY_SIZE).
inline constexpr size_t kMaxEntryKeySize = 65536;
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

// Builds the record for (key, meta, payload), signed when mac is not null. compress_level > 0
// stores the payload zstd-compressed at that level when that makes the record smaller (payloads
// under 64 bytes or incompressible ones are stored as they are).
[[nodiscard]] Blob encode_entry(ByteView key, ByteView meta, ByteView payload,
                                const MacKey *mac = nullptr, int compress_level = 0);

// The payload of an uncompressed record built by encode_entry for a payload of payload_size
// bytes: its last payload_size bytes (no parse, no check: for records that never left this
// process, which a memory store holds as they were built).
inline ByteView plain_entry_payload(ByteView record, uint64_t payload_size) {
  return {record.data + (record.size - payload_size), size_t(payload_size)};
}

struct EntryParts {
  ByteView key;
  ByteView meta;
  ByteView payload;  // the stored bytes: a zstd frame when compressed (see inflate_entry)
  size_t payload_offset = 0;
  uint64_t payload_size = 0;  // the caller's payload size (uncompressed)
  bool compressed = false;
  bool signed_with_mac = false;  // the header carries a MAC (verified only by decode_entry)
};

// Parses the header fields without verifying the checksum; nullopt (with *why) if malformed.
[[nodiscard]] std::optional<EntryParts> parse_entry(ByteView record, std::string *why);

// Parses and verifies a record read back for expected_key: structure, key equality and (when
// verify_checksum) the checksum and, when mac is not null, the MAC (an unsigned entry fails).
// nullopt with *why set if anything is wrong.
[[nodiscard]] std::optional<EntryParts> decode_entry(ByteView record, ByteView expected_key,
                                                     bool verify_checksum, std::string *why,
                                                     const MacKey *mac = nullptr);

// For a compressed entry (parts from parse_entry/decode_entry of record): a new, uncompressed,
// unsigned record holding the same key, metadata and payload. nullopt with *why set if the frame
// is damaged or does not decompress to exactly parts.payload_size bytes.
[[nodiscard]] std::optional<Blob> inflate_entry(const EntryParts &parts, std::string *why);

// zstd levels accepted by encode_entry (1..ZSTD_maxCLevel()).
int max_compress_level();

// The payload size an entry of record_size bytes declares, from its first bytes (head: at least
// kEntryHeaderSize, and for a compressed entry the start of its zstd frame: read
// kEntryProbeSize), when the header is consistent with the record's layout and size; nullopt
// otherwise. Cheap (no checksum): what accounting may trust without reading whole entries. A
// flipped size bit or a file that is not an entry gives nullopt, never a made-up size.
inline constexpr size_t kEntryProbeSize = 4096;
[[nodiscard]] std::optional<uint64_t> entry_payload_size_checked(ByteView head,
                                                                 uint64_t record_size);

// The key an entry's first bytes hold, when head reaches past it (unchecked: pair it with
// entry_payload_size_checked). nullopt when head is too short or not an entry header.
[[nodiscard]] std::optional<ByteView> entry_key_in(ByteView head);
// Where an entry's key lies: its size from the header (at most kMaxEntryKeySize), at offset
// kEntryHeaderSize. nullopt when head is not an entry header or the size is out of range.
[[nodiscard]] std::optional<size_t> entry_key_size(ByteView head);

// The payload size a header claims, unchecked (0 if bad): for listings only, never accounting.
std::optional<uint64_t> entry_payload_size(ByteView header);

}  // namespace progcache
