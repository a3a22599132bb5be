// Random damage campaigns for the persistent backends. Each trial stores entries, damages the
// closed cache the way a bad disk or a foreign writer would (one to three kinds, chosen by the
// trial's seed), then checks in a child process (a hang or crash fails the trial) that:
//   - opening works (a cache is disposable: damage is never a permanent error);
//   - every get returns exactly the bytes stored under that key, or a miss;
//   - count and size equal what get then serves, not what damaged headers or totals claim;
//   - puts that overflow the cap keep size under it and leave count and size exact again.
// PCACHE_CAMPAIGN_TRIALS and PCACHE_CAMPAIGN_SEED override the defaults; a failure names the seed
// and the damage, which reproduce it. One campaign damages a file-stream cache under a handle that
// has just read every entry (check_live_damage), as a disk or a writer may while a process runs.
#define PCACHE_ADMIN_UNSTABLE 1
#include <fcntl.h>
#include <gtest/gtest.h>
#include <progcache/progcache_admin.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <random>

#include "differential.hpp"
#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kCap = 48 * 1024;
constexpr int kStored = 12;
constexpr int kLaterPuts = 16;
constexpr const char *kForeignRow = "row with a TEXT key";
constexpr uint64_t kForeignSize = 4000;

uint32_t env_or(const char *name, uint32_t fallback) {
  const char *v = std::getenv(name);
  return v && *v ? uint32_t(std::stoul(v)) : fallback;
}

using Values = std::map<std::string, std::string>;

// Gets every key; fails (returns false, reason on stderr) on a value that is not the one stored.
bool sweep(Handle &c, const Values &values, uint64_t *served, uint64_t *bytes) {
  *served = *bytes = 0;
  for (const auto &[key, want] : values) {
    std::string got;
    const pcache_status st = c.get(key, &got);
    if (st == PCACHE_NOT_FOUND) continue;
    if (st != PCACHE_OK) {
      std::fprintf(stderr, "get %s: %s (%s)\n", key.c_str(), pcache_status_string(st),
                   pcache_last_error());
      return false;
    }
    if (got != want) {
      std::fprintf(stderr, "get %s served %zu bytes that are not the %zu stored\n", key.c_str(),
                   got.size(), want.size());
      return false;
    }
    ++*served;
    *bytes += got.size();
  }
  return true;
}

// The child's checks; 0 when all hold, else the number of the first that failed.
// foreign: a row no key reaches (a TEXT key) was added: it stays counted (it occupies the
// space) until an eviction reaches it, which the later puts need not do.
int check_damaged_cache(const std::string &uri, Values values, uint32_t seed, bool foreign) {
  ::alarm(60);  // a spin or a hang is a failure, not a stuck test run
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.max_size_bytes = kCap;
  pcache *raw = nullptr;
  if (pcache_open(uri.c_str(), &o, &raw) != PCACHE_OK) {
    std::fprintf(stderr, "open: %s\n", pcache_last_error());
    return 1;
  }
  pcache_close(raw);
  Handle c(uri, kCap);
  uint64_t served = 0, bytes = 0;
  // The first sweep meets the damage (and may reset a database it finds damaged midway, taking
  // entries it already served); the second sees what is left.
  if (!sweep(c, values, &served, &bytes) || !sweep(c, values, &served, &bytes)) return 2;
  // Damaged counters are never an error: statistics read (whatever they say) and gets go on.
  pcache_shared_stats shared{};
  shared.struct_size = sizeof shared;
  if (pcache_get_shared_stats(c, &shared) != PCACHE_OK) {
    std::fprintf(stderr, "shared stats: %s\n", pcache_last_error());
    return 9;
  }
  // Damage may leave a row no key reaches (a foreign key type); it goes with the first eviction.
  // Nothing can make the totals smaller than what is served, or absurd.
  if (c.count() < served || c.count() > kStored + 1 || c.size() < bytes || c.size() > 4 * kCap) {
    std::fprintf(stderr, "after damage: count %llu size %llu, served %llu entries %llu bytes\n",
                 (unsigned long long)c.count(), (unsigned long long)c.size(),
                 (unsigned long long)served, (unsigned long long)bytes);
    return 3;
  }
  std::mt19937 rng(seed ^ 0x5eed);
  for (int i = 0; i < kLaterPuts; ++i) {
    const std::string key = "n" + std::to_string(i);
    values[key] = make_value(uint32_t(100 + i), seed, 2000 + rng() % 1500);
    if (c.put(key, values[key]) != PCACHE_OK) {
      std::fprintf(stderr, "put %s: %s\n", key.c_str(), pcache_last_error());
      return 4;
    }
    if (c.size() > kCap) {
      std::fprintf(stderr, "size %llu over the cap after put %d\n", (unsigned long long)c.size(),
                   i);
      return 5;
    }
  }
  if (!sweep(c, values, &served, &bytes)) return 6;
  const bool foreign_left = foreign && c.count() == served + 1 && c.size() == bytes + kForeignSize;
  if (!foreign_left && (c.count() != served || c.size() != bytes)) {
    std::fprintf(stderr, "after puts: count %llu size %llu, served %llu entries %llu bytes\n",
                 (unsigned long long)c.count(), (unsigned long long)c.size(),
                 (unsigned long long)served, (unsigned long long)bytes);
    return 7;
  }
  std::string last;
  if (c.get("n" + std::to_string(kLaterPuts - 1), &last) != PCACHE_OK) return 8;  // newest stays
  return 0;
}

Values store_values(const std::string &uri, uint32_t seed) {
  std::mt19937 rng(seed);
  Values values;
  Handle c(uri, kCap);
  for (int i = 0; i < kStored; ++i) {
    const std::string key = "k" + std::to_string(i);
    values[key] = make_value(uint32_t(i), seed, 500 + rng() % 2500);
    EXPECT_EQ(c.put(key, values[key]), PCACHE_OK) << pcache_last_error();
  }
  return values;
}

void flip_bit(const std::string &path, uint64_t offset, int bit) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  unsigned char b = 0;
  if (::pread(fd, &b, 1, off_t(offset)) == 1) {  // past the end (a truncated file): nothing
    b ^= uint8_t(1u << bit);
    EXPECT_EQ(::pwrite(fd, &b, 1, off_t(offset)), 1);
  }
  ::close(fd);
}

void overwrite(const std::string &path, uint64_t offset, const std::string &bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), off_t(offset)), ssize_t(bytes.size()));
  ::close(fd);
}

std::string random_bytes(std::mt19937 &rng, size_t n) {
  std::string s(n, '\0');
  for (char &ch : s) ch = char(rng());
  return s;
}

void sql_exec(const std::string &db, const std::string &sql) {
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  char *err = nullptr;
  // Damage may have made the statement impossible; the trial goes on with what it did.
  sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  sqlite3_free(err);
  sqlite3_close(h);
}

int64_t sql_int(const std::string &db, const std::string &sql) {
  sqlite3 *h = nullptr;
  int64_t v = -1;
  if (sqlite3_open(db.c_str(), &h) == SQLITE_OK) {
    sqlite3_stmt *s = nullptr;
    if (sqlite3_prepare_v2(h, sql.c_str(), -1, &s, nullptr) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return v;
}

uint64_t file_size(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

// One kind of damage to a closed SQLite cache; returns its description.
std::string damage_sqlite(const std::string &db, std::mt19937 &rng) {
  const uint64_t size = file_size(db);
  int64_t page = sql_int(db, "PRAGMA page_size");
  if (page <= 0) page = 4096;  // an earlier damage made the file unreadable
  if (size == 0) return "empty file";
  switch (rng() % 10) {
    case 0: {
      const uint64_t at = rng() % size;
      flip_bit(db, at, int(rng() % 8));
      return "bit flipped at byte " + std::to_string(at);
    }
    case 8: {
      // Inside a table's statement in sqlite_master: a CHECK constraint that no put passes, a
      // type or a name that no statement prepares against, or a schema SQLite cannot parse.
      const std::string bytes = read_file(db);
      const size_t at = bytes.find("CREATE TABLE entries");
      if (at == std::string::npos) return "no schema text to damage";
      const size_t len = std::min<size_t>(160, bytes.size() - at);
      const uint64_t where = at + rng() % len;
      flip_bit(db, where, int(rng() % 7));  // bit 7 makes a byte no parser reads as text
      return "schema bit flipped at byte " + std::to_string(where);
    }
    case 9: {
      static const char *const kJunk[] = {"'many'", "-7", "9.9e30", "x'00ff'", "NULL"};
      const char *junk = kJunk[rng() % 5];
      sql_exec(db, std::string("PRAGMA ignore_check_constraints=1; UPDATE meta SET value = ") +
                       junk + " WHERE name NOT IN ('total_size', 'entry_count')");
      return std::string("counters set to ") + junk;
    }
    case 1: {
      const uint64_t at = rng() % 100;  // the database header
      flip_bit(db, at, int(rng() % 8));
      return "header bit flipped at byte " + std::to_string(at);
    }
    case 2: {
      const uint64_t n = (size + uint64_t(page) - 1) / uint64_t(page);
      const uint64_t p = rng() % n;
      overwrite(db, p * uint64_t(page), random_bytes(rng, size_t(page)));
      return "page " + std::to_string(p + 1) + " of " + std::to_string(n) + " overwritten";
    }
    case 3: {
      // The primary-key or recency index damaged in place: integrity_check fails, lookups that
      // use it may find nothing, or the wrong rowid.
      const char *index = rng() % 2 ? "sqlite_autoindex_entries_1" : "recency_by_atime";
      const int64_t root = sql_int(
          db, std::string("SELECT rootpage FROM sqlite_master WHERE name = '") + index + "'");
      if (root <= 0) return "no index to damage";
      overwrite(db, uint64_t(root - 1) * uint64_t(page) + 8 + rng() % 64, random_bytes(rng, 24));
      return std::string("index ") + index + " damaged";
    }
    case 4: {
      // A row whose key is TEXT (the old schema's, or one written past the CHECK), oldest of all.
      sql_exec(db,
               "PRAGMA ignore_check_constraints=1;"
               "INSERT INTO entries VALUES('k3', x'00', 4000);"
               "INSERT INTO recency VALUES(last_insert_rowid(), -1, 0);"
               "UPDATE meta SET value = value + 4000 WHERE name = 'total_size';"
               "UPDATE meta SET value = value + 1 WHERE name = 'entry_count';");
      static_assert(kForeignSize == 4000);
      return kForeignRow;
    }
    case 5: {
      const int64_t total = int64_t(rng() % 200000) - 100000, count = int64_t(rng() % 60) - 30;
      sql_exec(db, "UPDATE meta SET value = " + std::to_string(total) +
                       " WHERE name = 'total_size'; UPDATE meta SET value = " +
                       std::to_string(count) + " WHERE name = 'entry_count';");
      return "totals set to " + std::to_string(total) + " bytes, " + std::to_string(count) +
             " entries";
    }
    case 6: {
      const uint64_t to = rng() % size;
      EXPECT_EQ(::truncate(db.c_str(), off_t(to)), 0);
      return "truncated to " + std::to_string(to) + " bytes";
    }
    default: {
      overwrite(db + "-wal", 0, random_bytes(rng, 4096 + rng() % 8192));
      ::chmod((db + "-wal").c_str(), 0600);
      return "a -wal file of junk";
    }
  }
}

std::vector<std::string> entry_files(const std::string &dir) {
  std::vector<std::string> out;
  for (const std::string &f : list_files(dir)) {
    const std::string rel = f.substr(dir.size() + 1);
    if (rel.size() == 2 + 1 + 32 && rel[2] == '/') out.push_back(f);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string hex_name(std::mt19937 &rng) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(32, '0');
  for (char &ch : s) ch = kHex[rng() % 16];
  return s;
}

// One kind of damage to a closed file-stream cache; returns its description.
std::string damage_filestream(const std::string &dir, std::mt19937 &rng) {
  const std::vector<std::string> entries = entry_files(dir);
  if (entries.empty()) return "no entries left to damage";
  const size_t v = rng() % entries.size();
  const std::string &victim = entries[v];
  const uint64_t size = file_size(victim);
  if (size == 0) return "an empty entry";
  switch (rng() % 9) {
    case 0: {
      const uint64_t at = rng() % size;
      flip_bit(victim, at, int(rng() % 8));
      return "bit flipped at byte " + std::to_string(at) + " of an entry";
    }
    case 8: {
      // The shard directory replaced in place: its entries must leave the totals.
      const std::string shard = fs::path(victim).parent_path();
      const std::string moved = dir + "/moved-" + std::to_string(rng());
      EXPECT_EQ(::rename(shard.c_str(), moved.c_str()), 0);
      switch (rng() % 3) {
        case 0:
          EXPECT_EQ(::symlink(moved.c_str(), shard.c_str()), 0);
          return "a shard directory replaced by a symbolic link to it";
        case 1:
          write_file(shard, "not a directory");
          return "a shard directory replaced by a file";
        default:
          EXPECT_EQ(::mkdir(shard.c_str(), 0700), 0);
          return "a shard directory replaced by an empty one";
      }
    }
    case 1: {
      const uint64_t at = rng() % std::min<uint64_t>(size, 64);  // the entry header
      flip_bit(victim, at, int(rng() % 8));
      return "header bit flipped at byte " + std::to_string(at) + " of an entry";
    }
    case 2: {
      const uint64_t to = rng() % size;
      EXPECT_EQ(::truncate(victim.c_str(), off_t(to)), 0);
      return "entry truncated to " + std::to_string(to) + " bytes";
    }
    case 3: {
      // Sparse junk named like an entry: 1 GiB that occupies nothing, claimed by nobody.
      const std::string junk = fs::path(victim).parent_path() / hex_name(rng);
      overwrite(junk, (1ull << 30) - 1, std::string(1, '\0'));
      return "1 GiB sparse junk named like an entry";
    }
    case 4: {
      const std::string junk = fs::path(victim).parent_path() / hex_name(rng);
      overwrite(junk, 0, random_bytes(rng, 1 + rng() % 8000));
      ::chmod(junk.c_str(), 0600);
      return "small junk named like an entry";
    }
    case 5: {
      // Another key's entry under this key's name: well formed, but not this key's.
      if (entries.size() < 2) return "one entry: nothing to swap";
      const std::string &other = entries[(v + 1 + rng() % (entries.size() - 1)) % entries.size()];
      write_file(victim, read_file(other));
      return "one entry's file copied over another's";
    }
    case 6: {
      const std::string stats = dir + "/stats";
      const uint64_t n = file_size(stats);
      if (n == 0) return "no stats file";
      if (rng() % 2) {
        flip_bit(stats, rng() % n, int(rng() % 8));
        return "stats bit flipped";
      }
      EXPECT_EQ(::truncate(stats.c_str(), off_t(rng() % n)), 0);
      return "stats truncated";
    }
    default: {
      EXPECT_EQ(::truncate(victim.c_str(), off_t(size + 1 + rng() % 50000)), 0);
      return "entry extended with zeros";
    }
  }
}

using Damager = std::string (*)(const std::string &, std::mt19937 &);

// Damage under a handle that has just read every entry twice, the entries large enough (16 KiB
// and more) that its hits may be vouched for without hashing (util/verified_records.hpp): in the
// same second, every get after the damage still returns the stored bytes or a miss. The child
// damages the cache itself, between its sweeps; 0 when all holds.
int check_live_damage(const std::string &uri, const std::string &dir, const Values &values,
                      uint32_t seed) {
  ::alarm(60);
  Handle c(uri);
  ::usleep(30 * 1000);  // past the clock tick the parent's puts were stamped in
  timespec now;
  do {  // early in a second of the monotonic clock, so that the sweeps share it
    ::usleep(10 * 1000);
    ::clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  } while (now.tv_nsec > 300000000);
  uint64_t served = 0, bytes = 0;
  if (!sweep(c, values, &served, &bytes) || !sweep(c, values, &served, &bytes)) return 2;
  if (served != values.size()) return 3;  // nothing damaged yet: every entry is served
  std::mt19937 rng(seed);
  std::string what;
  for (uint32_t k = 0, n = 1 + rng() % 3; k < n; ++k)
    what += (what.empty() ? "" : "; ") + damage_filestream(dir, rng);
  if (!sweep(c, values, &served, &bytes)) {
    std::fprintf(stderr, "after %s\n", what.c_str());
    return 4;
  }
  return 0;
}

void run_live_campaign() {
  const uint32_t trials = env_or("PCACHE_CAMPAIGN_TRIALS", 40);
  const uint32_t base = env_or("PCACHE_CAMPAIGN_SEED", 20261129);
  for (uint32_t t = 0; t < trials; ++t) {
    const uint32_t seed = base + t;
    TempDir d;
    const std::string dir = d / "fs";
    const std::string uri = "filestream:" + dir;
    std::mt19937 rng(seed ^ 0x11fe);
    Values values;
    {
      Handle c(uri);
      for (int i = 0; i < kStored; ++i) {
        const std::string key = "k" + std::to_string(i);
        values[key] = make_value(uint32_t(i), seed, 16 * 1024 + rng() % (32 * 1024));
        ASSERT_EQ(c.put(key, values[key]), PCACHE_OK) << pcache_last_error();
      }
    }
    const int rc = wait_for(spawn([&] { return check_live_damage(uri, dir, values, seed); }));
    EXPECT_EQ(rc, 0) << "filestream, live, seed " << seed << ": check " << rc << " failed";
  }
}

void run_campaign(const std::string &scheme, const std::string &file, Damager damage) {
  const uint32_t trials = env_or("PCACHE_CAMPAIGN_TRIALS", 40);
  const uint32_t base = env_or("PCACHE_CAMPAIGN_SEED", 20261123);
  for (uint32_t t = 0; t < trials; ++t) {
    const uint32_t seed = base + t;
    TempDir d;
    const std::string path = d / file;
    const std::string uri = scheme + ":" + path;
    const Values values = store_values(uri, seed);
    std::mt19937 rng(seed);
    std::string what;
    for (uint32_t k = 0, n = 1 + rng() % 3; k < n; ++k)
      what += (what.empty() ? "" : "; ") + damage(path, rng);
    const bool foreign = what.find(kForeignRow) != std::string::npos;
    const int rc = wait_for(spawn([&] { return check_damaged_cache(uri, values, seed, foreign); }));
    EXPECT_EQ(rc, 0) << scheme << " seed " << seed << " (" << what << "): check " << rc
                     << " failed";
  }
}

// The memo surface: the cap `progcache config` stores and the memos a compile keeps (the NVRTC
// build's identity, file facts, include scans, observations). Damage to them may cost a compile,
// never change one's bytes, and never lift the cap.
constexpr const char *kMemoCap = "48K";
constexpr uint64_t kMemoCapBytes = 48 * 1024;

struct MemoTrial {
  std::string uri, work;
  difftest::Source source;
};

// Sets the cap and compiles once through the cache: every kind of memo is written.
void store_memos(const MemoTrial &t) {
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open(t.uri.c_str(), &o, &c), PCACHE_OK) << pcache_last_error();
  ASSERT_EQ(pcache_admin_config_set(c, "max_size", kMemoCap), PCACHE_OK) << pcache_last_error();
  const difftest::Outcome first = difftest::compile(c, t.source);
  EXPECT_EQ(first.status, PCACHE_OK) << first.warning << first.log;
  pcache_close(c);
}

// The campaign's program, its headers in work.
difftest::Source memo_trial_source(const std::string &work) {
  difftest::Source s;
  s.text = "#include \"a.h\"\nextern \"C\" __global__ void k(int *x) { *x = A; }\n";
  s.options = {"-arch=sm_90", "-I" + work};
  return s;
}

// The child's checks; 0 when all hold. fallback: the cap a cache whose stored cap cannot be
// verified applies (the configuration's, else the default).
int check_damaged_memos(const MemoTrial &t, bool cap_gone) {
  ::alarm(120);
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  pcache *c = nullptr;
  if (pcache_open(t.uri.c_str(), &o, &c) != PCACHE_OK) {
    std::fprintf(stderr, "open: %s\n", pcache_last_error());
    return 1;
  }
  pcache_admin_info info{};
  info.struct_size = sizeof info;
  if (pcache_admin_info_get(c, &info) != PCACHE_OK) return 2;
  const uint64_t cap = info.max_size_bytes;
  if (cap != kMemoCapBytes && cap != (5ull << 30) && !(cap == 0 && cap_gone)) {
    std::fprintf(stderr, "cap %llu (%s): neither the stored one nor the default\n",
                 (unsigned long long)cap, info.max_size_source);
    return 3;
  }
  // Through the cache first: in this fresh process nothing has loaded libcrypto yet, so an
  // unsigned cache's hit finds its identity by the damaged memos too (core/identity_memo.hpp).
  const difftest::Outcome cached = difftest::compile(c, t.source);
  const difftest::Outcome fresh = difftest::compile(nullptr, t.source);
  const difftest::Outcome again = difftest::compile(c, t.source);
  pcache_close(c);
  if (fresh.status != PCACHE_OK) {
    std::fprintf(stderr, "uncached compile: %s %s\n", fresh.warning.c_str(), fresh.log.c_str());
    return 4;
  }
  if (cached.status != fresh.status || cached.bytes != fresh.bytes) {
    std::fprintf(stderr, "through the cache: %s, %zu bytes (%s) against %zu uncached\n",
                 pcache_status_string(cached.status), cached.bytes.size(),
                 cached.from_cache ? "a hit" : "compiled", fresh.bytes.size());
    return 5;
  }
  if (again.bytes != fresh.bytes || !again.from_cache) {
    std::fprintf(stderr, "the next compile %s: %s\n", again.from_cache ? "differs" : "missed",
                 again.warning.c_str());
    return 6;
  }
  return 0;
}

std::vector<std::string> sql_names(const std::string &db) {
  std::vector<std::string> out;
  sqlite3 *h = nullptr;
  if (sqlite3_open(db.c_str(), &h) == SQLITE_OK) {
    sqlite3_stmt *s = nullptr;
    if (sqlite3_prepare_v2(h, "SELECT name FROM memo ORDER BY name", -1, &s, nullptr) == SQLITE_OK)
      while (sqlite3_step(s) == SQLITE_ROW)
        out.emplace_back(reinterpret_cast<const char *>(sqlite3_column_text(s, 0)));
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return out;
}

std::string sql_quote(const std::string &text) {
  std::string out = "'";
  for (char ch : text) out += ch == '\'' ? std::string("''") : std::string(1, ch);
  return out + "'";
}

// One kind of damage to a SQLite cache's memos; *cap_gone when it may have removed the cap.
std::string damage_sqlite_memos(const std::string &db, std::mt19937 &rng, bool *cap_gone,
                                const std::string &cap) {
  const std::vector<std::string> names = sql_names(db);
  if (names.empty()) return "no memos left";
  const std::string victim = names[rng() % names.size()];
  const std::string other = names[rng() % names.size()];
  const std::string v = sql_quote(victim), o = sql_quote(other);
  const bool is_cap = victim == cap;
  switch (rng() % 8) {
    case 0: {
      const int64_t at = int64_t(rng() % 200);
      const int bit = int(rng() % 8);
      sql_exec(db, "UPDATE memo SET record = substr(record, 1, " + std::to_string(at) +
                       ") || CAST(char(unicode(CAST(substr(record, " + std::to_string(at + 1) +
                       ", 1) AS TEXT)) ^ " + std::to_string(1 << bit) +
                       ") AS BLOB) || substr(record, " + std::to_string(at + 2) +
                       ") WHERE name = " + v);
      return "a bit of memo " + victim + " flipped";
    }
    case 1:
      sql_exec(db,
               "UPDATE memo SET record = substr(record, 1, length(record) / 2) WHERE name = " + v);
      return "memo " + victim + " truncated";
    case 2:
      sql_exec(db, "UPDATE memo SET record = (SELECT record FROM memo WHERE name = " + o +
                       ") WHERE name = " + v);
      return "memo " + other + "'s record copied over " + victim + "'s";
    case 3:
      sql_exec(db, "UPDATE memo SET record = randomblob(" + std::to_string(1 + rng() % 300) +
                       ") WHERE name = " + v);
      return "memo " + victim + " replaced by junk";
    case 4:
      *cap_gone |= is_cap || other == cap;
      sql_exec(db, "DELETE FROM memo WHERE name = " + o + " AND name <> " + v +
                       "; UPDATE memo SET name = " + o + " WHERE name = " + v);
      return "memo " + victim + " renamed " + other;
    case 5:
      *cap_gone |= is_cap;
      sql_exec(db, "DELETE FROM memo WHERE name = " + v);
      return "memo " + victim + " deleted";
    case 6:
      *cap_gone = true;
      sql_exec(db, "DROP TABLE memo");
      return "the memo table dropped";
    default:
      sql_exec(db, std::string("UPDATE memo SET record = ") +
                       (rng() % 2 ? "'text, not a blob'" : "42") + " WHERE name = " + v);
      return "memo " + victim + " of the wrong type";
  }
}

// One kind of damage to a file-stream cache's memos; *cap_gone when it may have removed the cap.
std::string damage_filestream_memos(const std::string &dir, std::mt19937 &rng, bool *cap_gone,
                                    const std::string &cap) {
  const std::string meta = dir + "/meta";
  std::vector<std::string> files = list_files(meta);
  std::sort(files.begin(), files.end());
  if (files.empty()) return "no memos left";
  const std::string victim = files[rng() % files.size()];
  const std::string other = files[rng() % files.size()];
  const bool is_cap = victim == cap;
  const uint64_t size = file_size(victim);
  switch (rng() % 8) {
    case 0: {
      const uint64_t at = size ? rng() % size : 0;
      flip_bit(victim, at, int(rng() % 8));
      return "a bit of a memo flipped at byte " + std::to_string(at);
    }
    case 1:
      EXPECT_EQ(::truncate(victim.c_str(), off_t(size ? rng() % size : 0)), 0);
      return "a memo truncated";
    case 2: {
      const std::string a = read_file(victim), b = read_file(other);
      write_file(victim, b);
      write_file(other, a);
      return "two memos swapped";
    }
    case 3:
      write_file(victim, random_bytes(rng, 1 + rng() % 300));
      return "a memo replaced by junk";
    case 4:
      *cap_gone |= is_cap || other == cap;
      EXPECT_EQ(::rename(victim.c_str(), other.c_str()), 0);
      return "a memo renamed over another";
    case 5:
      *cap_gone |= is_cap;
      EXPECT_EQ(::unlink(victim.c_str()), 0);
      EXPECT_EQ(::mkfifo(victim.c_str(), 0600), 0);
      return "a memo replaced by a FIFO";
    case 6:
      *cap_gone |= is_cap;
      EXPECT_EQ(::unlink(victim.c_str()), 0);
      EXPECT_EQ(::symlink("/dev/zero", victim.c_str()), 0);
      return "a memo replaced by a symbolic link to /dev/zero";
    default:
      *cap_gone = true;
      remove_tree(meta);
      write_file(meta, "not a directory");
      return "the memo directory replaced by a file";
  }
}

// cap: where the stored cap lives (the memo's name in SQLite, its file in a file-stream cache).
using MemoDamager = std::string (*)(const std::string &, std::mt19937 &, bool *,
                                    const std::string &);

// The file of a file-stream cache's memo, found by the name inside it (before any damage).
std::string memo_file(const std::string &dir, const std::string &name) {
  for (const std::string &f : list_files(dir + "/meta"))
    if (read_file(f).find(name) != std::string::npos) return f;
  return "";
}

void run_memo_campaign(const std::string &scheme, const std::string &file, MemoDamager damage) {
  // A cap from the environment or a config file would hide the stored one.
  ScopedEnv no_cap("PCACHE_MAX_SIZE", "");
  ::unsetenv("PCACHE_MAX_SIZE");
  const uint32_t trials = env_or("PCACHE_CAMPAIGN_TRIALS", 16);
  const uint32_t base = env_or("PCACHE_CAMPAIGN_SEED", 20261125);
  for (uint32_t trial = 0; trial < trials; ++trial) {
    const uint32_t seed = base + trial;
    std::mt19937 rng(seed);
    TempDir d;
    ScopedEnv config_home("XDG_CONFIG_HOME", d / "config");
    const bool signed_cache = rng() % 2;
    std::optional<ScopedEnv> secret;
    if (signed_cache) {
      write_file(d / "secret", "the campaign's secret");
      ASSERT_EQ(::chmod((d / "secret").c_str(), 0600), 0);
      secret.emplace("PCACHE_SECRET_FILE", d / "secret");
    } else {
      ::unsetenv("PCACHE_SECRET_FILE");
    }
    MemoTrial t;
    t.uri = scheme + ":" + (d / file);
    t.work = d / "w";
    ASSERT_EQ(::mkdir(t.work.c_str(), 0700), 0);
    difftest::write_aged(t.work + "/a.h", "#include \"b.h\"\n#define A (B + 1)\n");
    difftest::write_aged(t.work + "/b.h", "#define B 41\n");
    t.source = memo_trial_source(t.work);
    store_memos(t);
    const std::string cap =
        scheme == "sqlite" ? "config/max_size" : memo_file(d / file, "config/max_size");
    ASSERT_FALSE(cap.empty());
    std::string what;
    bool cap_gone = false;
    for (uint32_t k = 0, n = 1 + rng() % 3; k < n; ++k)
      what += (what.empty() ? "" : "; ") + damage(d / file, rng, &cap_gone, cap);
    if (rng() % 3 == 0) {  // the memos now describe a header that changed
      difftest::write_aged(t.work + "/b.h", "#define B 6\n", 30);
      what += "; b.h changed";
    }
    // In a fresh process (a fork would inherit this one's libcrypto).
    const int rc = run_test_in_fresh_process("DamageCampaign.DISABLED_MemoCheckChild",
                                             {{"PCACHE_TEST_MEMO_URI", t.uri},
                                              {"PCACHE_TEST_MEMO_WORK", t.work},
                                              {"PCACHE_TEST_MEMO_CAP_GONE", cap_gone ? "1" : "0"}});
    EXPECT_EQ(rc, 0) << scheme << " memos, seed " << seed << (signed_cache ? ", signed" : "")
                     << " (" << what << "): check " << rc << " failed";
  }
}

}  // namespace

TEST(DamageCampaign, SqliteMemos) {
  run_memo_campaign("sqlite", "cache.db", &damage_sqlite_memos);
}

TEST(DamageCampaign, FileStreamMemos) {
  run_memo_campaign("filestream", "fs", &damage_filestream_memos);
}

// check_damaged_memos in a fresh process; exits with its result.
TEST(DamageCampaign, DISABLED_MemoCheckChild) {
  const char *uri = std::getenv("PCACHE_TEST_MEMO_URI");
  if (!uri) GTEST_SKIP() << "helper of the memo campaigns";
  MemoTrial t;
  t.uri = uri;
  t.work = std::getenv("PCACHE_TEST_MEMO_WORK");
  t.source = memo_trial_source(t.work);
  const int rc =
      check_damaged_memos(t, std::string(std::getenv("PCACHE_TEST_MEMO_CAP_GONE")) == "1");
  std::fflush(nullptr);
  ::_exit(rc);
}

TEST(DamageCampaign, Sqlite) {
  run_campaign("sqlite", "cache.db", &damage_sqlite);
}

TEST(DamageCampaign, FileStream) {
  run_campaign("filestream", "fs", &damage_filestream);
}

TEST(DamageCampaign, FileStreamUnderAnOpenHandle) {
  run_live_campaign();
}
