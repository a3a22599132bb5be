// Random damage campaigns for the persistent backends. Each trial stores entries, damages the
// closed cache the way a bad disk or a foreign writer would (one to three kinds, chosen by the
// trial's seed), then checks in a child process (a hang or crash fails the trial) that:
//   - opening works (a cache is disposable: damage is never a permanent error);
//   - every get returns exactly the bytes stored under that key, or a miss;
//   - count and size equal what get then serves, not what damaged headers or totals claim;
//   - puts that overflow the cap keep size under it and leave count and size exact again.
// PCACHE_CAMPAIGN_TRIALS and PCACHE_CAMPAIGN_SEED override the defaults; a failure names the seed
// and the damage, which reproduce it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;
namespace fs = std::filesystem;

namespace {

constexpr uint64_t kCap = 48 * 1024;
constexpr int kStored = 12;
constexpr int kLaterPuts = 16;

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
int check_damaged_cache(const std::string &uri, Values values, uint32_t seed) {
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
  if (c.count() != served || c.size() != bytes) {
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
  switch (rng() % 8) {
    case 0: {
      const uint64_t at = rng() % size;
      flip_bit(db, at, int(rng() % 8));
      return "bit flipped at byte " + std::to_string(at);
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
      return "row with a TEXT key";
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
  switch (rng() % 8) {
    case 0: {
      const uint64_t at = rng() % size;
      flip_bit(victim, at, int(rng() % 8));
      return "bit flipped at byte " + std::to_string(at) + " of an entry";
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
    const int rc = wait_for(spawn([&] { return check_damaged_cache(uri, values, seed); }));
    EXPECT_EQ(rc, 0) << scheme << " seed " << seed << " (" << what << "): check " << rc
                     << " failed";
  }
}

}  // namespace

TEST(DamageCampaign, Sqlite) {
  run_campaign("sqlite", "cache.db", &damage_sqlite);
}

TEST(DamageCampaign, FileStream) {
  run_campaign("filestream", "fs", &damage_filestream);
}
