// What the drop-ins share (dropin_common/support.hpp): the memo of accepted calls must tell call
// sequences apart by every argument and by their order, and keep what was remembered with them;
// an interned input is the bytes given, keyed by their own digest, whatever was interned before.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cache.hpp"
#include "dropin_common/support.hpp"

using progcache::Cache;
using progcache::CacheOptions;
using progcache::dropin::AcceptedCalls;
using progcache::dropin::CallText;
using progcache::dropin::decode_slots;
using progcache::dropin::encode_slots;
using progcache::dropin::intern_input;
using progcache::dropin::KeptAnswer;
using progcache::dropin::OutputSlot;

namespace {

std::unique_ptr<Cache> memory_cache() {
  return Cache::open("memory:", CacheOptions());
}

TEST(AcceptedCalls, ASequenceIsKnownOnlyAsRemembered) {
  auto cache = memory_cache();
  AcceptedCalls calls("nvJitLink abc", "create");
  calls.add(CallText().add("data").add(uint64_t(2)).add("x").text());
  EXPECT_FALSE(calls.known(cache.get()).has_value());
  calls.remember(cache.get(), "log");
  ASSERT_TRUE(calls.known(cache.get()).has_value());
  EXPECT_EQ(*calls.known(cache.get()), "log");

  // Another build, another creating call, another argument, or the same calls in another order:
  // none is known.
  AcceptedCalls build("nvJitLink abd", "create");
  build.add(CallText().add("data").add(uint64_t(2)).add("x").text());
  EXPECT_FALSE(build.known(cache.get()).has_value());
  AcceptedCalls argument("nvJitLink abc", "create");
  argument.add(CallText().add("data").add(uint64_t(3)).add("x").text());
  EXPECT_FALSE(argument.known(cache.get()).has_value());
  AcceptedCalls a("b", "c"), b("b", "c");
  a.add("one");
  a.add("two");
  a.remember(cache.get());
  b.add("two");
  b.add("one");
  EXPECT_FALSE(b.known(cache.get()).has_value());
  EXPECT_TRUE(a.known(cache.get()).has_value());
  EXPECT_FALSE(AcceptedCalls("b", "c").known(nullptr).has_value());  // no cache: nothing known
}

TEST(CallText, PartsAreDelimitedByTheirLengths) {
  EXPECT_NE(CallText().add("ab").add("c").text(), CallText().add("a").add("bc").text());
  EXPECT_NE(CallText().add("").text(), CallText().text());
}

TEST(InternInput, TheSameBytesShareACopyAndOthersNever) {
  std::string big(100 << 10, 'x');
  const auto first = intern_input(big.data(), big.size());
  const auto again = intern_input(big.data(), big.size());
  EXPECT_EQ(first.bytes, again.bytes);  // one copy, compared, not copied again
  EXPECT_EQ(first.digest, again.digest);
  big[50 << 10] = 'y';  // the caller's buffer changed in place: same size, same address
  const auto changed = intern_input(big.data(), big.size());
  EXPECT_NE(changed.digest, first.digest);
  EXPECT_EQ(*changed.bytes, big);
  EXPECT_EQ(first.bytes->at(50 << 10), 'x');  // what was kept is what was given then
  const auto small = intern_input("abc", 3);
  EXPECT_EQ(*small.bytes, "abc");
  EXPECT_EQ(small.digest, progcache::content_digest(progcache::ByteView("abc", 3)));
}

// What a drop-in keeps for a library build (libNVVM's versions, NVRTC's architectures) answers
// that build only: another build, and nothing at all before the first answer, is not found.
TEST(KeptAnswer, AnswersTheKeyItWasKeptForOnly) {
  KeptAnswer<std::vector<int>> kept;
  std::vector<int> out{7};
  EXPECT_FALSE(kept.find("", &out));  // nothing kept yet, not even for the empty key
  EXPECT_EQ(out, std::vector<int>{7});
  kept.keep("NVRTC a", {75, 80});
  EXPECT_TRUE(kept.find("NVRTC a", &out));
  EXPECT_EQ(out, (std::vector<int>{75, 80}));
  EXPECT_FALSE(kept.find("NVRTC b", &out));
  kept.keep("NVRTC b", {90});
  EXPECT_FALSE(kept.find("NVRTC a", &out));  // the last build's answer only
  EXPECT_TRUE(kept.find("NVRTC b", &out));
  EXPECT_EQ(out, std::vector<int>{90});
}

// The payload of the drop-in nvJitLink's and libNVVM's entries: decoded exactly, and any payload
// this version did not write in whole (truncated anywhere, extended, another magic) decodes to
// nothing, so the drop-in runs the library instead of answering from it.
TEST(DropinSlots, APayloadDecodesWholeOrNotAtAll) {
  const OutputSlot slots[2] = {{0, 0, true, std::string("cubin\0bytes", 11)}, {6, 6, false, ""}};
  const std::string payload = encode_slots("PNL1", slots, 2);
  OutputSlot back[2];
  ASSERT_TRUE(decode_slots(payload, "PNL1", back, 2));
  EXPECT_EQ(back[0].bytes, slots[0].bytes);
  EXPECT_EQ(back[1].size_result, 6);
  EXPECT_FALSE(back[1].size_written);
  for (size_t n = 0; n < payload.size(); ++n) {
    OutputSlot none[2];
    EXPECT_FALSE(decode_slots(payload.substr(0, n), "PNL1", none, 2)) << n << " bytes";
  }
  EXPECT_FALSE(decode_slots(payload + "x", "PNL1", back, 2));
  EXPECT_FALSE(decode_slots(payload, "PNV1", back, 2));
  OutputSlot three[3];
  EXPECT_FALSE(decode_slots(payload, "PNL1", three, 3));
}

}  // namespace
