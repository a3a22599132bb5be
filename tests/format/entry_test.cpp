// The entry format: round trip, and every kind of damage is detected.
#include "format/entry.hpp"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <string>

using namespace progcache;

namespace {
Blob sample() {
  return encode_entry(std::string_view("key"), std::string_view("meta"),
                      std::string_view("payload bytes"));
}
}  // namespace

TEST(Entry, RoundTrip) {
  Blob b = sample();
  std::string why;
  auto parts = decode_entry(b.view(), std::string_view("key"), true, &why);
  ASSERT_TRUE(parts) << why;
  EXPECT_EQ(parts->payload.str(), "payload bytes");
  EXPECT_EQ(parts->meta.str(), "meta");
  EXPECT_EQ(parts->payload_offset, 80u);  // 64 + 3 + 4, padded to a 16-byte boundary
  EXPECT_EQ(parts->payload_offset % 16, 0u);
  EXPECT_EQ(entry_payload_size(b.view()).value(), 13u);
}

// The checksum as docs/backends.md defines it, computed here by libxxhash itself: XXH3-128 of
// key|meta|padding|payload seeded with XXH3-64 of the header's first 32 bytes, high half first,
// each big-endian. For payloads on both sides of XXH3's long-input path (241 bytes) and of the
// size libxxhash's dispatched code takes over (64 KiB), so that no faster way of computing it
// moves a stored entry's bytes.
TEST(Entry, TheChecksumIsTheSeededXxh3OfTheBody) {
  for (size_t n : {size_t(0), size_t(100), size_t(1024), size_t(4096), size_t(65536 + 3)}) {
    std::string payload(n, '\0');
    for (size_t i = 0; i < n; ++i) payload[i] = char(i * 131 + 7);
    const Blob b = encode_entry(std::string_view("key"), std::string_view("meta"), payload);
    const uint8_t *r = b.data();
    const XXH128_hash_t h = XXH3_128bits_withSeed(r + kEntryHeaderSize, b.size() - kEntryHeaderSize,
                                                  XXH3_64bits(r, 32));
    XXH128_canonical_t want;
    XXH128_canonicalFromHash(&want, h);
    EXPECT_EQ(std::memcmp(r + 32, want.digest, 16), 0) << n;
  }
}

TEST(Entry, EveryFlippedByteIsDetected) {
  Blob good = sample();
  for (size_t i = 0; i < good.size(); ++i) {
    Blob b = Blob::copy_of(good.view());
    b.data()[i] ^= 0x01;
    std::string why;
    EXPECT_FALSE(decode_entry(b.view(), std::string_view("key"), true, &why)) << "byte " << i;
  }
}

TEST(Entry, ReservedHeaderBytesAreCoveredToo) {
  Blob good = sample();
  for (size_t i = 24; i < 32; ++i) {
    Blob b = Blob::copy_of(good.view());
    b.data()[i] ^= 0x80;
    EXPECT_FALSE(decode_entry(b.view(), std::string_view("key"), true, nullptr)) << "byte " << i;
  }
}

// Bytes 48-63 are the MAC's in a signed entry and must be zero in an unsigned one: parsing
// alone (no checksum) rejects a set bit in any of them, first or last.
TEST(Entry, AnUnsignedEntryWithReservedBytesSetIsRejectedByItsHeader) {
  Blob good = sample();
  ASSERT_TRUE(parse_entry(good.view(), nullptr));
  for (size_t i = 48; i < 64; ++i)
    for (int bit : {0x01, 0x80}) {
      Blob b = Blob::copy_of(good.view());
      b.data()[i] ^= static_cast<uint8_t>(bit);
      std::string why;
      EXPECT_FALSE(parse_entry(b.view(), &why)) << "byte " << i << " bit " << bit;
      EXPECT_NE(why.find("reserved"), std::string::npos) << "byte " << i << ": " << why;
    }
}

TEST(Entry, TruncationPaddingAndForeignKeyAreRejected) {
  Blob good = sample();
  std::string why;
  for (size_t n = 0; n < good.size(); ++n)
    EXPECT_FALSE(decode_entry(ByteView(good.data(), n), std::string_view("key"), true, &why)) << n;
  std::string padded(reinterpret_cast<const char *>(good.data()), good.size());
  padded += "x";
  EXPECT_FALSE(decode_entry(std::string_view(padded), std::string_view("key"), true, &why));
  EXPECT_FALSE(decode_entry(good.view(), std::string_view("kez"), true, &why));
  EXPECT_EQ(why, "entry holds another key");
}

TEST(Entry, PayloadIsSixteenByteAlignedForEveryKeyAndMetaSize) {
  for (size_t k = 1; k < 40; ++k)
    for (size_t m = 0; m < 20; ++m) {
      Blob b = encode_entry(std::string(k, 'k'), std::string(m, 'm'), std::string_view("payload"));
      auto parts = decode_entry(b.view(), std::string(k, 'k'), true, nullptr);
      ASSERT_TRUE(parts);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(parts->payload.data) % 16, 0u) << k << " " << m;
      EXPECT_EQ(parts->payload.str(), "payload");
    }
}

// The payload starts at the 16-byte boundary after key and metadata, behind zero bytes, as
// encode_entry lays it out; nothing else parses (a record that decodes re-encodes to itself).
TEST(Entry, OnlyTheCanonicalPaddingParses) {
  const Blob good = sample();  // key "key", meta "meta": 7 body bytes, 9 of padding, payload at 80
  ASSERT_TRUE(parse_entry(good.view(), nullptr));
  const std::string bytes(reinterpret_cast<const char *>(good.data()), good.size());
  // No padding: the payload right after the metadata, the header saying so.
  std::string unpadded = bytes.substr(0, 64 + 7) + bytes.substr(80);
  unpadded[24] = 0;
  std::string why;
  EXPECT_FALSE(parse_entry(std::string_view(unpadded), &why));
  EXPECT_NE(why.find("padding"), std::string::npos) << why;
  // The layout right but a padding byte set, whichever it is (the check reads them as words).
  for (size_t at = 64 + 7; at < 80; ++at) {
    std::string dirty = bytes;
    dirty[at] = char(0x80);
    EXPECT_FALSE(parse_entry(std::string_view(dirty), &why)) << at;
    EXPECT_NE(why.find("padding"), std::string::npos) << why;
  }
  // What fuzz_entry found (its checksum made to match): 6-byte key, no metadata, no padding.
  const uint8_t found[] = {0x50, 0x43, 0x45, 0x4e, 0x01, 0x00, 0x00, 0x00, 0x06, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x25, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0xab, 0x37, 0x78,
                           0x26, 0xef, 0x93, 0x13, 0xe3, 0xb4, 0xce, 0xbb, 0x5d, 0x72, 0x33, 0xcf,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x6b, 0x6b, 0x6b, 0x6b, 0x6b, 0x6b, 0x00, 0x00,
                           0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x70, 0x70, 0x70, 0x31,
                           0x4f, 0xfe, 0xf4, 0xfe, 0x7f, 0x00, 0x00, 0x70, 0x70, 0x70, 0x70, 0x70,
                           0x70, 0x70, 0x70, 0x70, 0x70, 0x70, 0x70, 0x70, 0x40, 0x70, 0x70};
  EXPECT_FALSE(decode_entry(ByteView(found, sizeof found), std::string_view("kkkkkk"), true, &why));
  EXPECT_NE(why.find("padding"), std::string::npos) << why;
}

// Every length of padding (0 to 15 bytes, by the key's length): each of its bytes is checked,
// and none of the key's bytes in front of it is taken for padding.
TEST(Entry, EveryPaddingByteOfEveryLengthIsChecked) {
  for (size_t k = 1; k <= 16; ++k) {
    const std::string key(k, 'k');
    const Blob b = encode_entry(key, std::string_view(), std::string_view("payload"));
    const std::string bytes(reinterpret_cast<const char *>(b.data()), b.size());
    const size_t pad = (16 - (64 + k) % 16) % 16;
    ASSERT_TRUE(parse_entry(b.view(), nullptr)) << k;
    for (size_t at = 64 + k; at < 64 + k + pad; ++at) {
      std::string dirty = bytes;
      dirty[at] = char(0x01);
      std::string why;
      EXPECT_FALSE(parse_entry(std::string_view(dirty), &why)) << k << " " << at;
      EXPECT_NE(why.find("padding bytes"), std::string::npos) << why;
    }
  }
}

namespace {
std::string repetitive(size_t n) {
  std::string s;
  while (s.size() < n) s += "mov.u32 %r" + std::to_string(s.size() % 13) + ", %tid.x;\n";
  s.resize(n);
  return s;
}
}  // namespace

TEST(Entry, CompressedRoundTripInflatesToAPlainEntry) {
  const std::string payload = repetitive(100000);
  Blob b = encode_entry(std::string_view("key"), std::string_view("meta"), payload, nullptr, 3);
  EXPECT_LT(b.size(), payload.size() / 4);
  EXPECT_EQ(entry_payload_size(b.view()).value(), payload.size());  // the caller's size
  std::string why;
  auto parts = decode_entry(b.view(), std::string_view("key"), true, &why);
  ASSERT_TRUE(parts) << why;
  ASSERT_TRUE(parts->compressed);
  EXPECT_EQ(parts->payload_size, payload.size());
  auto plain = inflate_entry(*parts, &why);
  ASSERT_TRUE(plain) << why;
  auto again = decode_entry(plain->view(), std::string_view("key"), true, &why);
  ASSERT_TRUE(again) << why;
  EXPECT_FALSE(again->compressed);
  EXPECT_EQ(again->payload.str(), payload);
  EXPECT_EQ(again->meta.str(), "meta");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(again->payload.data) % 16, 0u);
}

TEST(Entry, IncompressibleAndTinyPayloadsAreStoredPlain) {
  std::string noise(5000, '\0');
  uint32_t x = 12345;
  for (auto &c : noise) c = static_cast<char>((x = x * 1103515245 + 12345) >> 16);
  for (const std::string &payload : {noise, std::string("tiny"), std::string()}) {
    Blob b = encode_entry(std::string_view("k"), {}, payload, nullptr, 19);
    auto parts = decode_entry(b.view(), std::string_view("k"), true, nullptr);
    ASSERT_TRUE(parts);
    EXPECT_FALSE(parts->compressed) << payload.size();
    EXPECT_EQ(parts->payload.str(), payload);
  }
}

TEST(Entry, CompressedEntriesAreCheckedBeforeAndAfterDecompression) {
  const std::string payload = repetitive(20000);
  Blob good = encode_entry(std::string_view("key"), {}, payload, nullptr, 3);
  // Any flipped stored byte fails the checksum, before zstd sees it.
  for (size_t i = 0; i < good.size(); i += 7) {
    Blob b = Blob::copy_of(good.view());
    b.data()[i] ^= 0x01;
    EXPECT_FALSE(decode_entry(b.view(), std::string_view("key"), true, nullptr)) << i;
  }
  // Without the checksum (a forger can recompute it), the frame itself is still checked.
  std::string why;
  Blob lying = Blob::copy_of(good.view());
  lying.data()[16] ^= 0x01;  // header payload size no longer matches the frame's content size
  auto parts = decode_entry(lying.view(), std::string_view("key"), false, &why);
  ASSERT_TRUE(parts) << why;
  EXPECT_FALSE(inflate_entry(*parts, &why));
  EXPECT_NE(why.find("payload size"), std::string::npos) << why;
  Blob damaged = Blob::copy_of(good.view());
  damaged.data()[damaged.size() - 5] ^= 0xff;
  parts = decode_entry(damaged.view(), std::string_view("key"), false, &why);
  ASSERT_TRUE(parts);
  EXPECT_FALSE(inflate_entry(*parts, &why));
  // The MAC covers the compressed bytes.
  MacKey mac(std::string_view("secret"));
  Blob signed_entry = encode_entry(std::string_view("key"), {}, payload, &mac, 3);
  EXPECT_TRUE(decode_entry(signed_entry.view(), std::string_view("key"), true, &why, &mac)) << why;
  MacKey other(std::string_view("other"));
  EXPECT_FALSE(decode_entry(signed_entry.view(), std::string_view("key"), true, &why, &other));
}
