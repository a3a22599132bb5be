// The thread's spare block (util/spare_block.hpp): a block given back is the next one taken when
// it fits, not when it would waste most of itself, never another thread's, and giving back
// nothing leaves the spare as it was.
#include "util/spare_block.hpp"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "util/blob.hpp"

using progcache::keep_spare_block;
using progcache::max_spare_block;
using progcache::take_spare_block;

namespace {

#if defined(__SANITIZE_ADDRESS__)
#define SKIP_WITHOUT_SPARE() GTEST_SKIP() << "no block is kept under AddressSanitizer"
#else
#define SKIP_WITHOUT_SPARE() (void)0
#endif

// Leaves the thread without a spare: a 1-byte block kept in place of the last one (which that
// frees), then taken back and freed.
void drop_spare() {
  keep_spare_block(static_cast<uint8_t *>(std::malloc(1)), 1);
  size_t capacity = 0;
  std::free(take_spare_block(1, &capacity));
}

// The thread's spare made a new block of size bytes (nothing kept before it).
uint8_t *kept_block(size_t size) {
  drop_spare();
  size_t capacity = 0;
  uint8_t *block = take_spare_block(size, &capacity);
  EXPECT_EQ(capacity, size);
  keep_spare_block(block, capacity);
  return block;
}

}  // namespace

TEST(SpareBlock, ABlockGivenBackIsTakenAgainWhenItFits) {
  SKIP_WITHOUT_SPARE();
  uint8_t *block = kept_block(5000);
  size_t again = 0;
  EXPECT_EQ(take_spare_block(4000, &again), block);  // smaller fits
  EXPECT_EQ(again, 5000u);                           // and says its real size
  keep_spare_block(block, again);
  uint8_t *larger = take_spare_block(6000, &again);  // too small: a new block
  EXPECT_NE(larger, block);
  EXPECT_EQ(again, 6000u);
  std::free(larger);
  EXPECT_EQ(take_spare_block(5000, &again), block);  // still the spare
  std::free(block);
}

TEST(SpareBlock, ALargeSpareDoesNotGoToASmallBlock) {
  SKIP_WITHOUT_SPARE();
  uint8_t *block = kept_block(64 * 1024);
  size_t small = 0;
  uint8_t *other = take_spare_block(100, &small);  // would waste 64 KiB if kept for long
  EXPECT_NE(other, block);
  EXPECT_EQ(small, 100u);
  std::free(other);
  EXPECT_EQ(take_spare_block(40 * 1024, &small), block);  // at most 2x + 8 KiB: taken
  std::free(block);
}

TEST(SpareBlock, GivingBackNothingKeepsTheSpare) {
  SKIP_WITHOUT_SPARE();
  kept_block(5000);
  keep_spare_block(nullptr, 0);
  size_t capacity = 0;
  // The spare's own size, not the size asked for: the heap may hand a freed block out again.
  uint8_t *again = take_spare_block(3000, &capacity);
  EXPECT_EQ(capacity, 5000u);
  std::free(again);
}

TEST(SpareBlock, TooLargeABlockIsNotKept) {
  kept_block(max_spare_block() + 1);  // freed at once (AddressSanitizer would see a leak)
  size_t capacity = 0;
  // A request the large block would serve were it kept: a fresh block of the size asked for.
  uint8_t *next = take_spare_block(max_spare_block(), &capacity);
  EXPECT_EQ(capacity, max_spare_block());
  std::free(next);
}

TEST(SpareBlock, EachThreadKeepsItsOwn) {
  SKIP_WITHOUT_SPARE();
  uint8_t *mine = kept_block(3000);
  size_t capacity = 0;
  std::thread([&] {
    size_t theirs_capacity = 0;
    uint8_t *theirs = take_spare_block(3000, &theirs_capacity);
    EXPECT_NE(theirs, mine);
    keep_spare_block(theirs, theirs_capacity);  // freed when the thread exits
  }).join();
  EXPECT_EQ(take_spare_block(3000, &capacity), mine);
  std::free(mine);
}

// A read whose size only the read tells (a file-stream hit reads before its fstat) takes the
// spare whatever its size, or a block of the fallback size when the thread has none; the blob
// around it then shrinks a block far larger than what was read (a caller may keep it long).
TEST(SpareBlock, AnUnsizedReadTakesAnySpareAndFitsWhatItRead) {
  SKIP_WITHOUT_SPARE();
  uint8_t *block = kept_block(64 * 1024);
  size_t capacity = 0;
  EXPECT_EQ(progcache::take_any_spare_block(4096, &capacity), block);
  EXPECT_EQ(capacity, 64u * 1024);
  keep_spare_block(block, capacity);
  drop_spare();
  uint8_t *fallback = progcache::take_any_spare_block(4096, &capacity);
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(capacity, 4096u);
  std::free(fallback);

  EXPECT_FALSE(progcache::spare_too_large_for(16 * 1024, 4096));  // 2x + 8 KiB
  EXPECT_TRUE(progcache::spare_too_large_for(16 * 1024 + 1, 4096));
  kept_block(64 * 1024);
  progcache::Blob read = progcache::Blob::for_unsized_read(16 * 1024);
  EXPECT_EQ(read.size(), 64u * 1024);  // all of it readable until fitted
  std::memset(read.data(), 'r', 100);
  read.fit_read(100);
  EXPECT_EQ(read.size(), 100u);
  EXPECT_EQ(read.view().str(), std::string(100, 'r'));
  size_t kept = 0;
  std::free(read.release_block(&kept));
  EXPECT_EQ(kept, 100u) << "a 64 KiB block kept for 100 bytes";
}

namespace {

// Bytes in use in the main arena (where blocks malloc'd by the test's main thread live, wherever
// they are freed).
size_t main_arena_in_use() {
  return mallinfo2().uordblks;
}

// A thread_local whose destructor gives a block back: made before the thread's first kept
// block, so destroyed after the spare's releaser.
struct KeepsAtExit {
  uint8_t *block = nullptr;
  size_t capacity = 0;
  ~KeepsAtExit() { keep_spare_block(block, capacity); }
};

}  // namespace

// A thread's spare is freed when the thread exits (its releaser is armed by the thread's first
// kept block, once); a block given back from a destructor that runs after that is freed at once.
TEST(SpareBlock, AThreadsSpareIsFreedWhenItExits) {
  SKIP_WITHOUT_SPARE();
  constexpr size_t kBlock = 48 * 1024;
  const size_t at_start = main_arena_in_use();
  auto *spare = static_cast<uint8_t *>(std::malloc(kBlock));
  auto *late = static_cast<uint8_t *>(std::malloc(kBlock));
  ASSERT_TRUE(spare && late);
  const size_t before = main_arena_in_use();
  if (before < at_start + 2 * kBlock) {  // ThreadSanitizer's allocator, for one
    std::free(spare);
    std::free(late);
    GTEST_SKIP() << "this process's malloc does not report through mallinfo2";
  }
  std::thread([&] {
    thread_local KeepsAtExit keeps;
    keeps.block = late;
    keeps.capacity = kBlock;
    keep_spare_block(spare, kBlock);
    size_t capacity = 0;  // taken and given back again: the releaser is armed once
    keep_spare_block(take_spare_block(kBlock, &capacity), capacity);
  }).join();
  // Both blocks freed: 96 KiB fewer in use (less what the thread's start left, a few hundred
  // bytes). Without the releaser the late block would replace the spare and outlive the thread.
  const auto freed = int64_t(before) - int64_t(main_arena_in_use());
  EXPECT_GE(freed, int64_t(kBlock + kBlock / 2))
      << "the exited thread's spare or the block it gave back late was not freed";
}
