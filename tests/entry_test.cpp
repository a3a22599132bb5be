// The entry format: round trip, and every kind of damage is detected.
#include "entry.hpp"

#include <gtest/gtest.h>

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
