/* The floors of a fresh process's hit that derives a key (bench/fresh_process.py): read the
 * kernel's source, digest it with OpenSSL's BLAKE2b-512 initialised at its least cost, fetch the
 * cubin and write it out. Fetched from a file (the file-stream floor) or by one SELECT from a
 * WAL database keyed by the digest (the SQLite floor). No checks, no recency, no counters.
 * Usage: floor_hit SOURCE CUBIN OUT          the cubin from a file
 *        floor_hit SOURCE --db DB OUT        the cubin from DB (made by --make-db)
 *        floor_hit SOURCE --make-db DB CUBIN
 * With PCACHE_BENCH_PHASES=FILE it writes the CLOCK_MONOTONIC time (ns) of each phase's end, one a
 * line, as bench/fresh_hit.c does: main reached, source read, key derived, cubin fetched (the
 * database opened and the SELECT stepped, or the file read), cubin written, database closed. */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>

#include "phase_marks.h"

static char buf[16 << 20];

static size_t read_all(const char *path, char *to, size_t cap) {
  FILE *in = fopen(path, "rb");
  if (!in) return 0;
  const size_t n = fread(to, 1, cap, in);
  fclose(in);
  return n;
}

static int write_all(const char *path, const void *data, size_t n) {
  FILE *out = fopen(path, "wb");
  return out && fwrite(data, 1, n, out) == n && fclose(out) == 0 ? 0 : 1;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql, const unsigned char *key) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) return NULL;
  sqlite3_bind_blob(s, 1, key, 64, SQLITE_STATIC);
  return s;
}

int main(int argc, char **argv) {
  mark();
  if (argc != 4 && argc != 5) return 2;
  OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG | OPENSSL_INIT_NO_ADD_ALL_CIPHERS |
                          OPENSSL_INIT_NO_ADD_ALL_DIGESTS,
                      NULL);
  const size_t n = read_all(argv[1], buf, sizeof buf);
  mark();
  EVP_MD *md = EVP_MD_fetch(NULL, "BLAKE2B-512", NULL);
  unsigned char key[64];
  unsigned int key_size = 0;
  if (!n || !md || !EVP_Digest(buf, n, key, &key_size, md, NULL)) return 1;
  EVP_MD_free(md);
  mark();
  if (argc == 4) {
    const size_t size = read_all(argv[2], buf, sizeof buf);
    mark();
    const int rc = write_all(argv[3], buf, size);
    mark();
    mark();
    write_marks();
    return rc;
  }
  sqlite3 *db = NULL;
  if (sqlite3_open(argv[3], &db) != SQLITE_OK) return 1;
  int rc = 1;
  if (strcmp(argv[2], "--make-db") == 0) {
    const size_t size = read_all(argv[4], buf, sizeof buf);
    sqlite3_exec(
        db, "PRAGMA journal_mode=WAL; CREATE TABLE IF NOT EXISTS t(k BLOB PRIMARY KEY, v BLOB)",
        NULL, NULL, NULL);
    sqlite3_stmt *s = prepare(db, "INSERT OR REPLACE INTO t VALUES(?1, ?2)", key);
    sqlite3_bind_blob(s, 2, buf, (int)size, SQLITE_STATIC);
    rc = s && sqlite3_step(s) == SQLITE_DONE ? 0 : 1;
    sqlite3_finalize(s);
  } else if (strcmp(argv[2], "--db") == 0) {
    /* As progcache reads: the last connection's close neither checkpoints nor removes the WAL
     * and shared memory, which SQLite's default close does at every exit. */
    int persist = 1;
    sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
    sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist);
    sqlite3_stmt *s = prepare(db, "SELECT v FROM t WHERE k = ?1", key);
    if (s && sqlite3_step(s) == SQLITE_ROW) {
      mark();
      rc = write_all(argv[4], sqlite3_column_blob(s, 0), (size_t)sqlite3_column_bytes(s, 0));
      mark();
    }
    sqlite3_finalize(s);
  }
  sqlite3_close(db);
  mark();
  write_marks();
  return rc;
}
