// A file-stream or SQLite hit on a record this process found intact within the second, stored the
// same way since, is not hashed again (util/verified_records.hpp). What must hold: the skip happens
// only then; any change to the file or any commit, even at once, makes the next hit hash it; a
// peek always hashes; the MAC is always checked.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/cache.hpp"
#include "test_util.hpp"
#include "util/fsutil.hpp"
#include "util/stat_identity.hpp"
#include "util/verified_records.hpp"
#include "util/warning.hpp"

using namespace progcache;
using testutil::TempDir;

namespace {

constexpr int64_t kSecond = 1000000000;

timespec at_ns(int64_t ns) {
  return {time_t(ns / kSecond), long(ns % kSecond)};
}

StatIdentity identity_with(int64_t mtime_ns, int64_t ctime_ns) {
  StatIdentity id;
  id.dev = 1;
  id.ino = 2;
  id.size = 65536;
  id.mtime_ns = mtime_ns;
  id.ctime_ns = ctime_ns;
  return id;
}

// Hits that never refresh the entry's mtime (a refresh is a change: the next hit hashes again).
std::string fs_uri(const TempDir &d) {
  return "filestream:" + (d / "fs") + "?touch_interval_ms=3600000";
}

std::string payload(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = char(seed + i * 7);
  return s;
}

std::string only_entry_file(const std::string &dir) {
  std::string found;
  for (const std::string &f : testutil::list_files(dir)) {
    const std::string rel = f.substr(dir.size() + 1);
    if (rel.size() == 2 + 1 + 32 && rel[2] == '/') {
      EXPECT_TRUE(found.empty()) << "more than one entry file";
      found = f;
    }
  }
  return found;
}

// Waits until the coarse clock has passed the file's last change, so that a hit may vouch for it.
void wait_until_settled(const std::string &path) {
  for (int i = 0; i < 200; ++i) {
    struct stat st;
    EXPECT_EQ(::stat(path.c_str(), &st), 0);
    timespec now;
    ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (StatIdentity::of(st).settled_before(now)) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ADD_FAILURE() << path << " never settled";
}

// Returns early in a second of the monotonic clock (a token's lifetime), so that what follows
// within a few hundred milliseconds falls in the same second.
void wait_for_the_start_of_a_second() {
  timespec now;
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  } while (now.tv_nsec > 300000000);
}

// Writes the byte at offset back xor-ed with mask (0: the same byte, only the file's times change).
void xor_byte_in_place(const std::string &path, off_t offset, char mask) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, offset), 1);
  c = char(c ^ mask);
  ASSERT_EQ(::pwrite(fd, &c, 1, offset), 1);
  ::close(fd);
}

void flip_byte_in_place(const std::string &path, off_t offset) {
  xor_byte_in_place(path, offset, 0x20);
}

// Puts value under "k" and waits until its file may be vouched for, then for the start of a
// second (a token's lifetime), so that the hits that follow fall in one: the entry file, or ""
// when there is none.
std::string put_settled(Cache &cache, const TempDir &d, const std::string &value) {
  cache.put(ByteView(std::string_view("k")), ByteView(value));
  const std::string file = only_entry_file(d / "fs");
  if (file.empty()) return file;
  wait_until_settled(file);
  wait_for_the_start_of_a_second();
  return file;
}

std::string payload_of(const Hit &hit) {
  return std::string(hit.payload.str());
}

}  // namespace

TEST(VerifiedRecords, AFileChangedSinceTheClockWasReadIsNeverVouchedFor) {
  const int64_t t = 1700000000 * kSecond + 123456789;
  // Fine timestamps: settled once the coarse clock read before the stat is past the last change.
  EXPECT_FALSE(identity_with(t, t).settled_before(at_ns(t)));
  EXPECT_FALSE(identity_with(t - 5, t).settled_before(at_ns(t)));
  EXPECT_TRUE(identity_with(t - 5, t - 1).settled_before(at_ns(t)));
  EXPECT_FALSE(identity_with(t + kSecond, t - 1).settled_before(at_ns(t)))
      << "an mtime set into the future is a change not yet settled";
  // Whole seconds only (a file system without sub-second times): two seconds before.
  const int64_t whole = 1700000000 * kSecond;
  EXPECT_FALSE(identity_with(whole, whole).settled_before(at_ns(whole + kSecond)));
  EXPECT_FALSE(identity_with(whole, whole).settled_before(at_ns(whole + 2 * kSecond - 1)));
  EXPECT_TRUE(identity_with(whole, whole).settled_before(at_ns(whole + 2 * kSecond)));
  // Hundredths of a second (exFAT): a change within the same hundredth keeps the times.
  const int64_t hundredths = whole + 340000000;
  EXPECT_FALSE(identity_with(hundredths, hundredths).settled_before(at_ns(hundredths + 9999999)));
  EXPECT_TRUE(identity_with(hundredths, hundredths).settled_before(at_ns(hundredths + 10000000)));
  EXPECT_FALSE(identity_with(whole, hundredths).settled_before(at_ns(hundredths + 9999999)));

  EXPECT_EQ(VerifiedRecords::token_of_file(identity_with(t, t), at_ns(t)), 0u);
}

TEST(VerifiedRecords, OnlyTheIdentityAddedIsVouchedFor) {
  const int64_t t = 1700000000 * kSecond + 123456789;
  const timespec later = at_ns(t + kSecond);
  VerifiedRecords verified;
  wait_for_the_start_of_a_second();  // every token below made in one second
  const uint64_t token = VerifiedRecords::token_of_file(identity_with(t, t), later);
  ASSERT_NE(token, 0u);
  EXPECT_FALSE(verified.vouches_for(token));
  verified.add(token);
  EXPECT_TRUE(verified.vouches_for(token));
  EXPECT_FALSE(verified.vouches_for(0));
  verified.add(0);
  EXPECT_FALSE(verified.vouches_for(0));
  // Any field changed is another file.
  StatIdentity other = identity_with(t, t);
  for (int field = 0; field < 5; ++field) {
    StatIdentity changed = other;
    switch (field) {
      case 0:
        changed.dev += 1;
        break;
      case 1:
        changed.ino += 1;
        break;
      case 2:
        changed.size -= 1;
        break;
      case 3:
        changed.mtime_ns -= 1;
        break;
      default:
        changed.ctime_ns -= 1;
        break;
    }
    const uint64_t changed_token = VerifiedRecords::token_of_file(changed, later);
    EXPECT_NE(changed_token, 0u);
    EXPECT_FALSE(verified.vouches_for(changed_token)) << "field " << field;
  }
}

// An entry read twice: the second hit is vouched for, whether one read held the whole file (4 and
// 64 KiB) or the rest came after the fstat (300 KB, more than the first read's block). An
// in-place change of the same size after it is found by the next hit, whether that hit comes at
// once (within the clock's tick) or once the change has settled (still in the second of the
// vouched hit: only the file's identity tells), and with the change's mtime put back (its ctime
// still tells).
TEST(VouchedRead, AnyChangeToAVouchedFileIsHashedAgain) {
  for (const size_t size : {size_t(4096), size_t(65536), size_t(300000)}) {
    for (const bool settle_first : {false, true}) {
      for (const bool restore_mtime : {false, true}) {
        SCOPED_TRACE(std::to_string(size) + " bytes, " + (settle_first ? "settled" : "at once") +
                     (restore_mtime ? ", mtime put back" : ""));
        TempDir d;
        auto cache = Cache::open(fs_uri(d), CacheOptions{});
        const std::string value = payload(size, 'a');
        const std::string file = put_settled(*cache, d, value);
        ASSERT_FALSE(file.empty());
        auto first = cache->get(ByteView(std::string_view("k")));
        ASSERT_TRUE(first);
        EXPECT_FALSE(first->record->vouched());
        EXPECT_NE(first->record->record_token(), 0u);
        auto second = cache->get(ByteView(std::string_view("k")));
        ASSERT_TRUE(second);
        EXPECT_TRUE(second->record->vouched());
        EXPECT_EQ(payload_of(*second), value);

        struct stat before;
        ASSERT_EQ(::stat(file.c_str(), &before), 0);
        flip_byte_in_place(file, off_t(before.st_size) - 100);
        if (restore_mtime) {
          const timespec times[2] = {before.st_atim, before.st_mtim};
          ASSERT_EQ(::utimensat(AT_FDCWD, file.c_str(), times, 0), 0);
        }
        if (settle_first) wait_until_settled(file);
        EXPECT_FALSE(cache->get(ByteView(std::string_view("k"))))
            << "a changed file was vouched for";
        EXPECT_EQ(cache->stats().corrupt, 1u);
      }
    }
  }
}

TEST(VouchedRead, PeeksAndSmallEntriesAreAlwaysHashed) {
  TempDir d;
  auto cache = Cache::open("filestream:" + (d / "fs"), CacheOptions{});
  cache->put(ByteView(std::string_view("big")), ByteView(payload(65536, 'b')));
  cache->put(ByteView(std::string_view("small")),
             ByteView(payload(VerifiedRecords::kMinSize / 2, 's')));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (int i = 0; i < 2; ++i) {
    std::string damage;
    auto peeked = cache->peek(ByteView(std::string_view("big")), &damage);
    ASSERT_TRUE(peeked);
    EXPECT_EQ(peeked->record->record_token(), 0u);
    EXPECT_FALSE(peeked->record->vouched());
    auto small = cache->get(ByteView(std::string_view("small")));
    ASSERT_TRUE(small);
    EXPECT_EQ(small->record->record_token(), 0u);
    EXPECT_FALSE(small->record->vouched());
  }
}

// What the cache does with a record its store vouches for, shown by making the store vouch for a
// damaged file (as if the damage had come with no change to the file's identity): the checksum
// is skipped, the MAC is not, and a peek still finds the damage.
TEST(VouchedRead, AVouchedRecordSkipsTheChecksumButNeverTheMac) {
  for (const bool signed_cache : {false, true}) {
    TempDir d;
    CacheOptions options;
    if (signed_cache) options.secret = std::string(32, 'S');
    auto cache = Cache::open(fs_uri(d), options);
    const std::string value = payload(65536, 'm');
    cache->put(ByteView(std::string_view("k")), ByteView(value));
    const std::string file = only_entry_file(d / "fs");
    ASSERT_FALSE(file.empty());
    struct stat st;
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    flip_byte_in_place(file, off_t(st.st_size) - 100);  // in the payload
    wait_until_settled(file);
    wait_for_the_start_of_a_second();  // the token told and the get in one second
    ASSERT_EQ(::stat(file.c_str(), &st), 0);
    timespec coarse;
    ::clock_gettime(CLOCK_REALTIME_COARSE, &coarse);
    Blob told(1);
    told.set_record_token(VerifiedRecords::token_of_file(StatIdentity::of(st), coarse), false);
    cache->backend().note_intact(told);
    thread_messages().warning.clear();
    const auto hit = cache->get(ByteView(std::string_view("k")));
    if (signed_cache) {
      EXPECT_FALSE(hit) << "a vouched record was returned without its MAC checked";
      EXPECT_NE(thread_messages().warning.find("MAC does not match"), std::string::npos)
          << thread_messages().warning;
      continue;
    }
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit->record->vouched());
    EXPECT_NE(payload_of(*hit), value) << "the damaged bytes, unhashed";
    std::string damage;
    EXPECT_FALSE(cache->peek(ByteView(std::string_view("k")), &damage));
    EXPECT_EQ(damage, "entry checksum mismatch");
  }
}

namespace {

std::string g_file_to_change;  // the entry file the hook changes, once
char g_change_mask = 0;        // what the byte 100 from its end is xor-ed with

// Before the entry's read (after the hit read the clock): changes the file in place, as a writer
// racing the hit would.
int change_before_read(sys::Op op) {
  if (op != sys::Op::read || g_file_to_change.empty()) return 0;
  const std::string file = std::exchange(g_file_to_change, "");
  struct stat st;
  if (::stat(file.c_str(), &st) == 0)
    xor_byte_in_place(file, off_t(st.st_size) - 100, g_change_mask);
  return 0;
}

// A get of "k" during which file's byte 100 from its end is xor-ed with mask just before the
// read.
std::optional<Hit> get_changed_before_read(Cache &cache, const std::string &file, char mask) {
  g_file_to_change = file;
  g_change_mask = mask;
  sys::set_fault_hook(change_before_read);
  auto hit = cache.get(ByteView(std::string_view("k")));
  sys::set_fault_hook(nullptr);
  EXPECT_TRUE(g_file_to_change.empty()) << "the hit read nothing";
  return hit;
}

// Where both race tests start: a file-stream cache of its own holding "k", a 64 KiB value of
// fill bytes, as a settled entry file (empty file: the entry was not found on disk).
struct SettledEntry {
  explicit SettledEntry(char fill)
      : cache(Cache::open(fs_uri(d), CacheOptions{})),
        value(payload(65536, fill)),
        file(put_settled(*cache, d, value)) {}
  TempDir d;
  std::unique_ptr<Cache> cache;
  std::string value, file;
};

}  // namespace

// A file vouched for that changes as a hit reads it (the fstat after the read finds it changed)
// is hashed.
TEST(VouchedRead, AFileChangedWhileItIsReadIsHashed) {
  SettledEntry e('r');
  ASSERT_FALSE(e.file.empty());
  ASSERT_TRUE(e.cache->get(ByteView(std::string_view("k"))));
  const auto hit = get_changed_before_read(*e.cache, e.file, 0x20);
  EXPECT_FALSE(hit) << "bytes changed during the read were vouched for";
  EXPECT_EQ(e.cache->stats().corrupt, 1u);
}

// A hit reads before it stats the file, so the identity its token names is the one after the
// read. A write that lands after the hit read the clock (here just before its read; as well
// between its read and its fstat, where the bytes read predate it) must leave the hit with no
// token: what it hashed cannot vouch for the file as the write left it.
TEST(VouchedRead, AFileWrittenDuringAHitIsNotVouchedForByIt) {
  SettledEntry e('w');
  ASSERT_FALSE(e.file.empty());
  // The same byte written back: the content stays intact, the file's times change.
  auto during = get_changed_before_read(*e.cache, e.file, 0);
  ASSERT_TRUE(during);
  EXPECT_EQ(payload_of(*during), e.value);
  EXPECT_EQ(during->record->record_token(), 0u) << "an identity changed under the hit";
  auto next = e.cache->get(ByteView(std::string_view("k")));
  ASSERT_TRUE(next);
  EXPECT_FALSE(next->record->vouched());
}

namespace {

std::string sqlite_uri(const TempDir &d) {
  return "sqlite:" + (d / "c.db") + "?touch_interval_ms=3600000";
}

// Flips one byte of key's stored record through db, if the row is there; false if it is not.
bool flip_a_byte_if_present(sqlite3 *db, const std::string &key) {
  sqlite3_stmt *read = nullptr;
  sqlite3_prepare_v2(db, "SELECT record FROM entries WHERE key = ?1", -1, &read, nullptr);
  sqlite3_bind_blob(read, 1, key.data(), int(key.size()), SQLITE_TRANSIENT);
  std::string record;
  if (sqlite3_step(read) == SQLITE_ROW)
    record.assign(static_cast<const char *>(sqlite3_column_blob(read, 0)),
                  size_t(sqlite3_column_bytes(read, 0)));
  sqlite3_finalize(read);
  if (record.size() < 200) return false;
  record[record.size() - 100] = char(record[record.size() - 100] ^ 0x20);
  sqlite3_stmt *write = nullptr;
  sqlite3_prepare_v2(db, "UPDATE entries SET record = ?1 WHERE key = ?2", -1, &write, nullptr);
  sqlite3_bind_blob(write, 1, record.data(), int(record.size()), SQLITE_TRANSIENT);
  sqlite3_bind_blob(write, 2, key.data(), int(key.size()), SQLITE_TRANSIENT);
  const bool done = sqlite3_step(write) == SQLITE_DONE;
  sqlite3_finalize(write);
  return done;
}

// Flips one byte of key's stored record through a connection of its own: a commit, as any other
// writer's.
void damage_row(const std::string &db_path, const std::string &key) {
  sqlite3 *db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  EXPECT_TRUE(flip_a_byte_if_present(db, key)) << "no row for " << key;
  sqlite3_close(db);
}

}  // namespace

// A SQLite hit is vouched for by its connection's snapshot: the same row in an unchanged database,
// within the second. Any commit, by any connection, makes the next hit hash again.
TEST(VouchedRead, ACommitMakesTheNextSqliteHitHashAgain) {
  // An incremental read, a column, and a row as small as SQLite hits are vouched for from.
  for (const size_t size : {size_t(65536), size_t(24 * 1024), size_t(4096)}) {
    TempDir d;
    auto cache = Cache::open(sqlite_uri(d), CacheOptions{});
    const std::string value = payload(size, 'q');
    const std::string_view key = "k";
    cache->put(ByteView(key), ByteView(value));
    wait_for_the_start_of_a_second();
    auto first = cache->get(ByteView(key));
    ASSERT_TRUE(first);
    EXPECT_NE(first->record->record_token(), 0u);
    EXPECT_FALSE(first->record->vouched());
    auto second = cache->get(ByteView(key));
    ASSERT_TRUE(second);
    EXPECT_TRUE(second->record->vouched()) << size;
    EXPECT_EQ(payload_of(*second), value);

    damage_row(d / "c.db", std::string(key));
    EXPECT_FALSE(cache->get(ByteView(key))) << "a row changed by a commit was vouched for";
    EXPECT_EQ(cache->stats().corrupt, 1u);
  }
}

TEST(VouchedRead, SqlitePeeksAndSmallEntriesAreAlwaysHashed) {
  TempDir d;
  auto cache = Cache::open(sqlite_uri(d), CacheOptions{});
  cache->put(ByteView(std::string_view("big")), ByteView(payload(65536, 'b')));
  cache->put(ByteView(std::string_view("small")), ByteView(payload(1000, 's')));
  for (int i = 0; i < 2; ++i) {
    std::string damage;
    auto peeked = cache->peek(ByteView(std::string_view("big")), &damage);
    ASSERT_TRUE(peeked);
    EXPECT_EQ(peeked->record->record_token(), 0u);
    auto small = cache->get(ByteView(std::string_view("small")));
    ASSERT_TRUE(small);
    EXPECT_EQ(small->record->record_token(), 0u);
    EXPECT_FALSE(small->record->vouched());
  }
}

// A handle's hits run on its main connection and on read connections beside it, each with a data
// version of its own (SQLite counts per connection), so the same number can name two different
// snapshots on two connections: a row's token names its connection too. Threads hit a few rows
// of a handle while another connection commits byte flips into them and the test puts them back:
// every hit is the stored value, never a flipped one vouched for by another connection's token.
TEST(VouchedRead, NoConnectionVouchesForAnothersRead) {
  TempDir d;
  auto cache = Cache::open(sqlite_uri(d), CacheOptions{});
  constexpr int kKeys = 4;
  auto key_of = [](int k) { return "k" + std::to_string(k); };
  auto value_of = [](int k) { return payload(4096 + 512 * size_t(k), char('a' + k)); };
  for (int k = 0; k < kKeys; ++k)
    cache->put(ByteView(std::string_view(key_of(k))), ByteView(std::string_view(value_of(k))));
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, hits{0}, vouched{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; !stop; ++i) {
        const int k = i % kKeys;
        const std::string key = key_of(k);
        auto hit = cache->get(ByteView(std::string_view(key)));
        if (!hit) continue;
        ++hits;
        if (hit->record->vouched()) ++vouched;
        if (payload_of(*hit) != value_of(k)) ++wrong;
      }
    });
  sqlite3 *db = nullptr;
  ASSERT_EQ(sqlite3_open((d / "c.db").c_str(), &db), SQLITE_OK);
  sqlite3_busy_timeout(db, 5000);
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  for (int round = 0; std::chrono::steady_clock::now() < end; ++round) {
    const int k = round % kKeys;
    if (round % 3 == 2)
      cache->put(ByteView(std::string_view(key_of(k))), ByteView(std::string_view(value_of(k))));
    else
      (void)flip_a_byte_if_present(db, key_of(k));
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  stop = true;
  for (auto &t : threads) t.join();
  sqlite3_close(db);
  EXPECT_EQ(wrong.load(), 0) << "a flipped record was served";
  EXPECT_GT(hits.load(), 100);
  EXPECT_GT(vouched.load(), 0) << "no hit was vouched for: the test checks nothing";
}

// A file dated past int64 nanoseconds (year 2400; ext4 keeps dates to 2446): its identity is
// still its own, and it is never taken as settled or as changed long ago, so what it holds is
// read each time. Its mtime in nanoseconds overflowed int64 (UBSan), and the wrapped value, far
// in the past, made it settled and not racy.
TEST(StatIdentityDates, AFileDatedPastInt64NanosecondsIsNeverSettled) {
  struct stat st {};
  st.st_dev = 1;
  st.st_ino = 2;
  st.st_size = 3;
  st.st_mtim = {time_t(13569465600), 0};  // 2400-01-01
  st.st_ctim = {time_t(2000), 0};         // changed long ago
  const StatIdentity far = StatIdentity::of(st);
  EXPECT_TRUE(far.is_racy());
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME_COARSE, &now);
  EXPECT_FALSE(far.settled_before(now));
  st.st_mtim.tv_nsec = 1;
  EXPECT_FALSE(StatIdentity::of(st) == far);  // a nanosecond later is another identity
  st.st_mtim = {time_t(2000), 5};             // an ordinary date: exact, and settled
  const StatIdentity near = StatIdentity::of(st);
  EXPECT_EQ(near.mtime_ns, int64_t(2000) * kSecond + 5);
  EXPECT_FALSE(near.is_racy());
  EXPECT_TRUE(near.settled_before(now));
}
