// The drop-in NVRTC's entry payload (every output of a compile): what a hit replays must decode
// exactly, and bytes this version did not write (truncated, extended, a length past the end,
// another format) must decode to nothing, so the drop-in compiles instead of answering from them.
#include <gtest/gtest.h>

#include <string>

#include "outputs.hpp"

using progcache::ByteView;
using progcache::dropin::CompileOutputs;
using progcache::dropin::decode_outputs;
using progcache::dropin::encode_outputs;
using progcache::dropin::OutputKind;

namespace {

CompileOutputs sample() {
  CompileOutputs o;
  o[OutputKind::ptx] = {0, 0, true, std::string("//\n.version 9.0\n\0", 17)};
  o[OutputKind::cubin] = {0, 0, true,
                          std::string("\x7f"
                                      "ELF\0\0\x01",
                                      7)};
  o[OutputKind::ltoir] = {0, 0, false, ""};   // after a failed compile: success, size not written
  o[OutputKind::optixir] = {3, 3, true, ""};  // a getter that failed is replayed as failing
  o.lowered_result = 9;
  return o;
}

}  // namespace

TEST(DropinOutputs, RoundTripKeepsEveryStatusAndByte) {
  const std::string bytes = encode_outputs(sample());
  const auto back = decode_outputs(ByteView(bytes));
  ASSERT_TRUE(back);
  for (int k = 0; k < progcache::dropin::kOutputKinds; ++k) {
    EXPECT_EQ(back->slots[k].size_result, sample().slots[k].size_result) << k;
    EXPECT_EQ(back->slots[k].data_result, sample().slots[k].data_result) << k;
    EXPECT_EQ(back->slots[k].size_written, sample().slots[k].size_written) << k;
    EXPECT_EQ(back->slots[k].bytes, sample().slots[k].bytes) << k;
  }
  EXPECT_EQ(back->lowered_result, 9);
}

TEST(DropinOutputs, BytesItDidNotWriteDecodeToNothing) {
  const std::string bytes = encode_outputs(sample());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_outputs(ByteView(bytes.data(), n))) << "truncated to " << n;
  EXPECT_FALSE(decode_outputs(ByteView(bytes + "x"))) << "a trailing byte";
  std::string other = bytes;
  other[0] ^= 1;
  EXPECT_FALSE(decode_outputs(ByteView(other))) << "another format";
  std::string huge = bytes;
  huge[4 + 4 + 4 + 4 + 7] = '\x7f';  // the PTX length's top byte: far past the end
  EXPECT_FALSE(decode_outputs(ByteView(huge))) << "a length past the end";
}
