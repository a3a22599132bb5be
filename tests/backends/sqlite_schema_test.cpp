// The schema check's fast path: the schema SQLite writes for kSchema, modelled from its text, is
// what a fresh database holds (else every open pays for building the expected schema in a
// database of its own), and a damaged statement does not match it.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>

#include "backends/sqlite_internal.hpp"
#include "core/cache.hpp"
#include "test_util.hpp"

namespace {

using namespace progcache::sqlite_detail;

std::set<std::string> schema_of_file(const std::string &db, const char *damage = nullptr) {
  sqlite3 *h = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  if (damage) {
    EXPECT_EQ(sqlite3_exec(h, damage, nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  }
  std::set<std::string> schema = schema_of(h);
  sqlite3_close(h);
  return schema;
}

}  // namespace

TEST(SqliteSchema, TheModelOfAFreshSchemaIsWhatSqliteWrites) {
  testutil::TempDir d;
  const std::string db = d / "cache.db";
  (void)progcache::Cache::open("sqlite:" + db, {});
  const std::set<std::string> found = schema_of_file(db);
  EXPECT_EQ(found.size(), 8u) << "4 tables, 1 index, an automatic index per non-INTEGER key";
  EXPECT_EQ(found, modelled_schema(kSchema));
}

TEST(SqliteSchema, ADamagedStatementDoesNotMatchTheModel) {
  testutil::TempDir d;
  const std::string db = d / "cache.db";
  (void)progcache::Cache::open("sqlite:" + db, {});
  EXPECT_NE(schema_of_file(db,
                           "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = "
                           "replace(sql, 'size >= 0', 'size >= 8') WHERE name = 'entries'"),
            modelled_schema(kSchema));
}
