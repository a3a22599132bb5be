// SQLite, opened when a process first opens a SQLite cache: `progcache version`, file-stream,
// memory and Redis caches never map it (0.25-0.3 ms of every fresh process here whether it used
// SQLite or not; docs/performance.md). Its headers give the types and the SONAME the build
// compiled against; the SQLite backend's files call it through libsqlite().
#pragma once

#include <sqlite3.h>

#include "util/system_library.hpp"

// Every SQLite function the backend calls.
#define PCACHE_SQLITE_FUNCTIONS(X) \
  X(sqlite3_bind_blob)             \
  X(sqlite3_bind_blob64)           \
  X(sqlite3_bind_int64)            \
  X(sqlite3_bind_text)             \
  X(sqlite3_blob_bytes)            \
  X(sqlite3_blob_close)            \
  X(sqlite3_blob_open)             \
  X(sqlite3_blob_read)             \
  X(sqlite3_busy_timeout)          \
  X(sqlite3_changes)               \
  X(sqlite3_clear_bindings)        \
  X(sqlite3_close)                 \
  X(sqlite3_close_v2)              \
  X(sqlite3_column_blob)           \
  X(sqlite3_column_bytes)          \
  X(sqlite3_column_double)         \
  X(sqlite3_column_int)            \
  X(sqlite3_column_int64)          \
  X(sqlite3_column_text)           \
  X(sqlite3_column_type)           \
  X(sqlite3_db_config)             \
  X(sqlite3_db_readonly)           \
  X(sqlite3_errmsg)                \
  X(sqlite3_errstr)                \
  X(sqlite3_exec)                  \
  X(sqlite3_extended_errcode)      \
  X(sqlite3_extended_result_codes) \
  X(sqlite3_file_control)          \
  X(sqlite3_finalize)              \
  X(sqlite3_get_autocommit)        \
  X(sqlite3_initialize)            \
  X(sqlite3_last_insert_rowid)     \
  X(sqlite3_libversion)            \
  X(sqlite3_libversion_number)     \
  X(sqlite3_limit)                 \
  X(sqlite3_mutex_alloc)           \
  X(sqlite3_mutex_enter)           \
  X(sqlite3_mutex_leave)           \
  X(sqlite3_open)                  \
  X(sqlite3_open_v2)               \
  X(sqlite3_prepare_v2)            \
  X(sqlite3_prepare_v3)            \
  X(sqlite3_reset)                 \
  X(sqlite3_step)                  \
  X(sqlite3_system_errno)          \
  X(sqlite3_wal_checkpoint_v2)     \
  X(sqlite3_wal_hook)

namespace progcache {

PCACHE_SYSTEM_LIBRARY_STRUCT(LibSqlite, PCACHE_SQLITE_FUNCTIONS)

// SQLite's functions, the library opened (by PCACHE_SQLITE_SONAME) and resolved on the first call
// and kept for the process; a host that linked SQLite already shares its copy. Throws
// Error(Status::unsupported) naming the library and what dlopen or dlsym said. Thread-safe.
const LibSqlite &libsqlite();

// The oldest SQLite the backend's statements run on: 3.35.0, the first with DELETE ... RETURNING.
// The SONAME (libsqlite3.so.0) is every SQLite 3, so the library is checked when it is opened.
inline constexpr int kMinSqliteVersionNumber = 3035000;
inline constexpr const char *kMinSqliteVersion = "3.35.0";

// libsqlite(), refused with Error(Status::unsupported) naming both versions when the SQLite the
// process has is older than kMinSqliteVersion. Thread-safe.
const LibSqlite &libsqlite_checked();

}  // namespace progcache
