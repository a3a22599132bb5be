// Memos: the small records a cache keeps beside its entries. They are bounded (work memos are
// hints), but a record a person made (the stored cap) is never dropped to make room, nor lost
// when a damaged database is reset.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "core/cache.hpp"
#include "test_util.hpp"

namespace {

using progcache::Backend;
using progcache::Cache;
using progcache::CacheOptions;
using testutil::TempDir;

constexpr uint64_t kStoredCap = 123456;

std::unique_ptr<Cache> open_configured(const std::string &uri) {
  CacheOptions o;
  o.max_size_bytes = CacheOptions::kConfiguredCap;
  return Cache::open(uri, o);
}

size_t files_in(const std::string &dir) {
  size_t n = 0;
  for (const auto &e : std::filesystem::directory_iterator(dir)) n += e.is_regular_file();
  return n;
}

int64_t sql_int(const std::string &db, const char *sql) {
  sqlite3 *h = nullptr;
  int64_t v = -1;
  if (sqlite3_open(db.c_str(), &h) == SQLITE_OK) {
    sqlite3_stmt *s = nullptr;
    if (sqlite3_prepare_v2(h, sql, -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
      v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
  }
  sqlite3_close(h);
  return v;
}

// Stores the cap first (the oldest memo of all), then more work memos than the bound.
void store_cap_then_flood(const std::string &uri) {
  const auto cache = open_configured(uri);
  cache->store_cap(kStoredCap);
  for (size_t i = 0; i < Backend::kMaxMetaRecords + 600; ++i)
    cache->save_memo("facts/" + std::to_string(i), "a work memo");
}

}  // namespace

// The trim dropped the oldest memos first: the cap, stored once, went with the 20,001st memo
// and the cache became unbounded.
TEST(Memos, TheStoredCapOutlivesTheBoundInSqlite) {
  TempDir d;
  const std::string db = d / "cache.db";
  store_cap_then_flood("sqlite:" + db);
  EXPECT_LE(sql_int(db, "SELECT count(*) FROM memo"), int64_t(Backend::kMaxMetaRecords));
  const auto cache = open_configured("sqlite:" + db);
  EXPECT_EQ(cache->max_size_bytes(), kStoredCap);
  EXPECT_FALSE(cache->load_memo("facts/0")) << "the oldest work memo goes first";
  EXPECT_TRUE(cache->load_memo("facts/" + std::to_string(Backend::kMaxMetaRecords + 599)));
}

// A file-stream cache kept every memo ever written: its meta directory grew without bound.
TEST(Memos, AFileStreamCacheKeepsItsMemosBoundedAndItsCap) {
  TempDir d;
  const std::string dir = d / "fs";
  store_cap_then_flood("filestream:" + dir);
  const size_t kept = files_in(dir + "/meta");
  EXPECT_LE(kept, Backend::kMaxMetaRecords + 512);
  EXPECT_GE(kept, Backend::kMaxMetaRecords * 9 / 10);
  const auto cache = open_configured("filestream:" + dir);
  EXPECT_EQ(cache->max_size_bytes(), kStoredCap);
  EXPECT_TRUE(cache->load_memo("facts/" + std::to_string(Backend::kMaxMetaRecords + 599)));
}

// A damaged database is reset to empty; the cap stored in it, still readable, stays.
TEST(Memos, AResetDatabaseKeepsTheStoredCap) {
  TempDir d;
  const std::string db = d / "cache.db";
  {
    const auto cache = open_configured("sqlite:" + db);
    cache->store_cap(kStoredCap);
    cache->save_memo("facts/x", "a work memo");
  }
  // Damage that makes every statement fail to prepare: the table an entry lives in is gone.
  sqlite3 *h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "DROP TABLE recency", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  const auto cache = open_configured("sqlite:" + db);
  EXPECT_EQ(cache->max_size_bytes(), kStoredCap);
  EXPECT_FALSE(cache->load_memo("facts/x")) << "work memos go with the reset";
  EXPECT_EQ(sql_int(db.c_str(), "SELECT count(*) FROM sqlite_master WHERE name = 'recency'"), 1)
      << "the database was reset";
}
