/*
 * progcache: a cache for compiled CUDA programs (cubin, PTX, LTO-IR).
 *
 * This header is the whole public ABI of libprogcache.so.1. It is C99, includes only
 * <stddef.h> and <stdint.h>, and exposes only functions and fixed-width types, so that C,
 * C++, Fortran (bind(C)) and dlopen/FFI callers (Python ctypes, Julia, Rust) see the same thing.
 *
 * General rules (they hold for every function below unless its own comment says otherwise):
 *
 * - Status: every fallible function returns a pcache_status. PCACHE_OK (0) is success,
 *   PCACHE_NOT_FOUND (1) is a miss (not an error), negative values are errors. On an error the
 *   calling thread's pcache_last_error() holds a one-line explanation.
 * - Arguments: a NULL handle, a NULL out-pointer, or NULL data with a non-zero size is
 *   PCACHE_ERR_INVALID_ARG, never a crash. Out-parameters are left untouched on failure unless
 *   the function says otherwise.
 * - Keys: 1 to PCACHE_MAX_KEY_SIZE bytes of any content (NUL bytes included). A zero-length
 *   key is PCACHE_ERR_INVALID_ARG. Values may be empty.
 * - Ownership: the library never keeps a pointer the caller passed in after the call returns;
 *   memory the library returns is released with the function named in its comment.
 * - Threads: a pcache handle may be used by many threads at once, but not while another thread
 *   closes it.
 * - Closed handles: a call on a handle after pcache_close() returns PCACHE_ERR_INVALID_ARG
 *   ("closed or invalid"), and pcache_close() on it again likewise; the library keeps closed
 *   handles' memory for reuse so this never reads freed memory. (A later pcache_open() may hand
 *   the same pointer out again; a stale copy then refers to the new cache.)
 * - Environment: in setuid/setgid processes the library ignores every PCACHE_* variable
 *   (secure_getenv), so a caller cannot redirect a privileged program's cache or libraries.
 * - fork(): a handle opened before fork() may be used in the child, also when other threads
 *   were using it at the fork: pthread_atfork handlers take the library's locks before fork()
 *   and release them in both processes. Persistent backends detect the new process and open
 *   their own connection/descriptors. The child first closes the SQLite connections it
 *   inherited (no thread is inside SQLite at the fork: each use holds a lock fork() waits for),
 *   so that its own connections take their own file locks; the parent's connections and locks
 *   are not touched. SQLite's global mutexes (main, unix VFS, allocator) are held across the
 *   fork too. Not covered: OpenSSL's and the C library's own locks (their rules apply); a child
 *   that only exec()s is always safe.
 * - No C++ exception, type or allocator crosses this boundary.
 */
#ifndef PROGCACHE_PROGCACHE_H
#define PROGCACHE_PROGCACHE_H

#include <stddef.h>
#include <stdint.h>

#if defined(PCACHE_BUILDING_LIBRARY) && defined(__GNUC__)
#define PCACHE_API __attribute__((visibility("default")))
#else
#define PCACHE_API
#endif

#define PCACHE_VERSION_MAJOR 0
#define PCACHE_VERSION_MINOR 5
#define PCACHE_VERSION_PATCH 0
#define PCACHE_VERSION_NUMBER \
  (PCACHE_VERSION_MAJOR * 10000 + PCACHE_VERSION_MINOR * 100 + PCACHE_VERSION_PATCH)
#define PCACHE_VERSION_STRING "0.5.0"

/** Size in bytes of a key made by pcache_make_key(). */
#define PCACHE_KEY_SIZE 32
/** Largest key accepted by pcache_get/put/delete (64 KiB). */
#define PCACHE_MAX_KEY_SIZE 65536

#ifdef __cplusplus
extern "C" {
#endif

/** An open cache. Opaque; created by pcache_open(), destroyed by pcache_close(). */
typedef struct pcache pcache;

/** Result of every fallible call; one of the PCACHE_* codes below (fixed 32-bit size). */
typedef int32_t pcache_status;

/* Values are part of the ABI: append only, never renumber or reuse. */
enum {
  PCACHE_OK = 0,
  PCACHE_NOT_FOUND = 1,        /* a miss: not an error (damaged entries are misses too) */
  PCACHE_ERR_INVALID_ARG = -1, /* a bad argument; the message names it */
  PCACHE_ERR_NO_MEMORY = -2,   /* an allocation failed; nothing changed */
  PCACHE_ERR_IO = -3,      /* the OS refused a read or write (ENOSPC, EIO...); message has errno */
  PCACHE_ERR_CORRUPT = -4, /* damage that could not be healed in this call: a database
                              that could be neither reset in place nor moved aside */
  PCACHE_ERR_UNSUPPORTED = -5,       /* valid but not supported here: a newer database or struct
                                        field, rediss://, or a system library the call needs
                                        (libcrypto, SQLite, zstd, hiredis) that cannot be loaded;
                                        the message names it */
  PCACHE_ERR_BUSY = -6,              /* another process held a lock past busy_timeout_ms */
  PCACHE_ERR_PERMISSION = -7,        /* a read-only or untrusted cache (docs/security.md) */
  PCACHE_ERR_TOO_LARGE = -8,         /* a value over the cap or the backend's limit */
  PCACHE_ERR_COMPILE = -9,           /* NVRTC failed; the result (if requested) holds its log */
  PCACHE_ERR_CUDA_UNAVAILABLE = -10, /* no loadable libnvrtc / libcuda (message lists where) */
  PCACHE_ERR_CUDA = -11,             /* the driver refused a call; message has its error name */
  PCACHE_ERR_REMOTE = -12,           /* a remote store failed or did not answer in time */
  PCACHE_ERR_INTERNAL = -13          /* a bug: please report it with pcache_last_error() */
};

/**
 * Options for pcache_open(). Always fill with pcache_options_init() first, then change fields.
 * struct_size is the caller's sizeof(pcache_options): the library reads only that many bytes,
 * so a caller built against an older, smaller struct keeps working.
 */
/* pcache_options.flags */
enum {
  /* Trust a cache directory or file that another user owns, or that group/others can write
   * (a deliberately shared team cache). Without it such caches are refused (docs/security.md).
   * $PCACHE_ALLOW_SHARED=1 has the same effect. */
  PCACHE_OPEN_ALLOW_SHARED = 1,
  /* Allow a persistent cache in a setuid/setgid process (off by default: such a process must
   * not load binaries from a directory its caller controls). */
  PCACHE_OPEN_ALLOW_PRIVILEGED = 2,
  /* Open only a cache that exists (since 0.5): a SQLite database or file-stream directory that
   * is not there is PCACHE_NOT_FOUND, and nothing is created (tools that only read or remove,
   * so that a mistyped path creates no cache). Memory and Redis caches always exist. */
  PCACHE_OPEN_EXISTING = 4
};

/*
 * pcache_options.max_size_bytes: the cap the configuration gives (what pcache_options_init sets,
 * and what pcache_open with NULL options uses): a URI's ?max_size=, else $PCACHE_MAX_SIZE, else
 * the cap stored in the cache (`progcache config max_size 5G`), else max_size in the config
 * files, else 5 GiB for the default cache (opened with a NULL or empty URI) and none for others.
 * docs/admin.md. Since 0.4; before, pcache_options_init set $PCACHE_MAX_SIZE or 0.
 */
#define PCACHE_MAX_SIZE_CONFIGURED UINT64_MAX

typedef struct pcache_options {
  uint32_t struct_size; /* the caller's sizeof(pcache_options) */
  uint32_t flags;       /* PCACHE_OPEN_* bits; unknown bits are PCACHE_ERR_INVALID_ARG */
  /* cap on the sum of stored payload sizes: 0 = unbounded, PCACHE_MAX_SIZE_CONFIGURED = as
     configured (the default from pcache_options_init), else this many bytes. A URI's
     ?max_size= overrides it */
  uint64_t max_size_bytes;
  /* version 2 (32 bytes): */
  const void *secret;   /* a secret shared by the cache's trusted writers; NULL = none, unless
                           $PCACHE_SECRET_FILE names a file holding one. With a secret, every
                           entry is signed (keyed BLAKE2b) and every entry read from storage
                           must carry a valid MAC: unsigned or forged entries are misses,
                           counted as corrupt, never returned. Copied during pcache_open.
                           Under 16 bytes it can be guessed from a signed entry: it is used, and
                           pcache_last_error() warns of it after a successful open. */
  uint64_t secret_size; /* bytes of secret; 0 with a non-NULL secret is PCACHE_ERR_INVALID_ARG
                           (an empty key would sign with a publicly known key) */
  /* later versions append fixed-width fields here, never reorder */
} pcache_options;

/**
 * Fills the first struct_size bytes of *options with defaults and sets options->struct_size.
 * A struct_size larger than this library's sizeof(pcache_options) (a newer caller) is accepted:
 * the known fields are filled and the tail is zeroed.
 * Thread safety: touches only *options.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG if options is NULL, struct_size is smaller than
 * the first version of the struct (16 bytes), or $PCACHE_MAX_SIZE is not a size.
 */
PCACHE_API pcache_status pcache_options_init(pcache_options *options, uint32_t struct_size);

/**
 * Opens (creating if needed) the cache named by uri and stores the new handle in *out.
 *
 * URIs:
 *   NULL or ""        the default cache: sqlite:$PCACHE_DIR/cache.db, else cache_uri in the
 *                     config files (docs/admin.md), else
 *                     sqlite:$XDG_CACHE_HOME/progcache/cache.db, else
 *                     sqlite:$HOME/.cache/progcache/cache.db ($HOME unset, empty or
 *                     relative: the home in the passwd entry). $PCACHE_URI, when set and
 *                     non-empty, overrides all of these. Unless configured otherwise it is
 *                     capped at 5 GiB.
 *   "memory:"         an in-process LRU cache that lives until pcache_close().
 *   "sqlite:PATH"     one SQLite database file (WAL, exact LRU); see docs/backends.md.
 *   "filestream:DIR"  one file per entry under DIR (atomic rename); see docs/backends.md.
 *   "redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]"
 *                     a Redis server shared by many machines (entries zstd-compressed by
 *                     default; size caps are the server's maxmemory); see docs/distributed.md.
 *                     "rediss://" (TLS) is PCACHE_ERR_UNSUPPORTED.
 *   "tiered:URI|URI|..."
 *                     a stack of the above, fastest first: gets read through, puts write every
 *                     tier, a failing tier is skipped (remote ones for a back-off period) so
 *                     that gets and puts succeed while any tier works; see docs/distributed.md.
 * A sqlite: or filestream: path starting with "~/" is under the home directory ($HOME, else the
 * passwd entry's), as a shell would expand it; "~user/..." is PCACHE_ERR_INVALID_ARG; any other
 * relative path is from the working directory.
 * Backends accept parameters after '?', e.g. "sqlite:/tmp/c.db?busy_timeout_ms=2000"; every one
 * takes max_size=SIZE ("256M"), which overrides options->max_size_bytes for that cache. An
 * unknown parameter, an unknown scheme or trailing garbage is PCACHE_ERR_INVALID_ARG.
 *
 * options: NULL means defaults (as pcache_options_init: the configured cap, see
 * PCACHE_MAX_SIZE_CONFIGURED); otherwise it must have been filled by pcache_options_init(). A
 * malformed $PCACHE_MAX_SIZE (or max_size in a config file) is PCACHE_ERR_INVALID_ARG.
 * If the stored size exceeds a cap given by the URI, options or $PCACHE_MAX_SIZE,
 * least-recently-used entries are evicted down to it during open; a cap stored in the cache or
 * in a config file applies from the next put.
 * Ownership: uri and options are only read during the call. *out is owned by the caller and
 * released with pcache_close(). On failure *out is set to NULL (when out is not NULL).
 * Thread safety: may be called from any thread; separate handles are independent.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (out NULL, bad URI, bad options; a sqlite: path
 * naming an existing file, or a filestream: path naming an existing directory, that is not and
 * never was a progcache cache: it is left unchanged; a FIFO, device, socket or symbolic link
 * where a cache file goes; the secret file empty or over 1 MiB);
 * PCACHE_ERR_IO, PCACHE_ERR_PERMISSION (cannot create or open the storage; a directory or file
 * another user owns or can write, without PCACHE_OPEN_ALLOW_SHARED; a persistent cache in a
 * setuid/setgid process without PCACHE_OPEN_ALLOW_PRIVILEGED; the secret file readable by others);
 * PCACHE_ERR_UNSUPPORTED (a database written by a newer progcache; rediss://; a SQLite cache
 * without a loadable SQLite library, a redis:// cache without hiredis); PCACHE_ERR_BUSY (the
 * database stayed locked past the busy timeout); PCACHE_ERR_REMOTE (redis: the server cannot be
 * reached, or refuses the password or database; a tier of a tiered cache is not contacted at open);
 * PCACHE_ERR_NO_MEMORY; PCACHE_ERR_INTERNAL.
 */
PCACHE_API pcache_status pcache_open(const char *uri, const pcache_options *options, pcache **out);

/**
 * Closes a handle and releases everything it owns. Stored entries of persistent backends stay.
 * Views obtained from the handle must be released before closing it.
 * NULL is a harmless no-op. Calls on the handle afterwards return PCACHE_ERR_INVALID_ARG.
 * Thread safety: no other thread may be using the handle.
 * Returns PCACHE_OK (also for NULL); PCACHE_ERR_INVALID_ARG if the handle was already closed.
 */
PCACHE_API pcache_status pcache_close(pcache *cache);

/**
 * Looks key up. On a hit stores a newly allocated copy of the value in *data and its length in
 * *size and returns PCACHE_OK; on a miss returns PCACHE_NOT_FOUND and sets *data = NULL,
 * *size = 0. A hit refreshes the entry's recency (LRU), where the backend keeps it at a
 * granularity: sqlite: and filestream: record a use only for an entry last used longer ago than
 * their touch_interval_ms (docs/backends.md).
 * Ownership: *data belongs to the caller and must be released with pcache_free() (never free()).
 * An empty value gives a non-NULL *data with *size == 0.
 * A damaged entry is never returned: it is removed, counted in the stats (corrupt) and reported
 * as a miss.
 * Thread safety: safe to call concurrently on one handle.
 * Returns PCACHE_OK, PCACHE_NOT_FOUND; PCACHE_ERR_INVALID_ARG (NULL cache/data/size, NULL key,
 * key_size 0 or > PCACHE_MAX_KEY_SIZE); PCACHE_ERR_NO_MEMORY; PCACHE_ERR_IO; PCACHE_ERR_BUSY;
 * PCACHE_ERR_REMOTE (redis: unreachable, timed out or an error reply, with the server's message;
 * the next call reconnects. A tiered cache answers from the tiers that work and returns it
 * only when every tier failed); PCACHE_ERR_INTERNAL.
 */
PCACHE_API pcache_status pcache_get(pcache *cache, const void *key, size_t key_size, void **data,
                                    size_t *size);

/**
 * Like pcache_get() but copies into a caller buffer, for allocation-free hot paths.
 * *size is always set to the value's length on a hit. If capacity >= that length, the value is
 * copied to buffer and PCACHE_OK is returned; otherwise nothing is copied and
 * PCACHE_ERR_TOO_LARGE is returned (call again with a buffer of *size bytes).
 * buffer may be NULL when capacity is 0. On a miss *size is 0 and PCACHE_NOT_FOUND is returned.
 * Thread safety: as pcache_get(). Returns the statuses of pcache_get() plus PCACHE_ERR_TOO_LARGE.
 */
PCACHE_API pcache_status pcache_get_into(pcache *cache, const void *key, size_t key_size,
                                         void *buffer, size_t capacity, size_t *size);

/**
 * Releases memory returned by pcache_get(). NULL is a no-op. Any thread.
 * The thread that releases a copied value keeps its block (up to 64 KiB) for its next
 * pcache_get() and frees it when the thread exits; nothing of its old bytes is ever returned.
 * Aborts the process on a pointer pcache_get() did not return or one already released: freeing
 * it would corrupt the heap.
 */
PCACHE_API void pcache_free(void *data);

/**
 * A pinned, read-only view of a stored value (zero-copy on the memory backend; a private copy
 * on backends that cannot pin). Filled by pcache_get_view(), released by pcache_view_release().
 */
typedef struct pcache_view {
  const void *data; /* the value's bytes; valid until pcache_view_release() */
  size_t size;      /* the value's length */
  void *token;      /* owned by the library: what keeps the bytes alive */
} pcache_view;

/**
 * Looks key up and, on a hit, pins the stored bytes in *view without copying them (memory
 * backend) and returns PCACHE_OK. The bytes stay valid and unchanged until
 * pcache_view_release(view), even if another thread replaces, deletes or evicts the entry.
 * On a miss returns PCACHE_NOT_FOUND and zeroes *view.
 * Ownership: the view must be released with pcache_view_release(), before pcache_close().
 * Thread safety: as pcache_get(); a view may be released from any thread.
 * Returns the statuses of pcache_get().
 */
PCACHE_API pcache_status pcache_get_view(pcache *cache, const void *key, size_t key_size,
                                         pcache_view *view);

/** Releases a view filled by pcache_get_view() and zeroes it. NULL or a zeroed view: no-op. */
PCACHE_API void pcache_view_release(pcache_view *view);

/**
 * Stores a copy of size bytes at data under key, replacing any existing value, then evicts
 * least-recently-used entries until the stored total fits max_size_bytes.
 * A value larger than max_size_bytes is refused with PCACHE_ERR_TOO_LARGE and nothing is
 * evicted. data may be NULL only when size is 0.
 * Ownership: key and data are only read during the call.
 * Thread safety: safe to call concurrently; concurrent puts of one key: the last one wins and
 * readers see one writer's complete value, never a mix.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG; PCACHE_ERR_TOO_LARGE; PCACHE_ERR_NO_MEMORY;
 * PCACHE_ERR_IO; PCACHE_ERR_PERMISSION (read-only storage); PCACHE_ERR_BUSY; PCACHE_ERR_REMOTE
 * (redis, as pcache_get(); also a full server with maxmemory-policy noeviction. A tiered cache
 * succeeds when any tier stored the value: failed tiers are counted in tier_errors);
 * PCACHE_ERR_INTERNAL.
 */
PCACHE_API pcache_status pcache_put(pcache *cache, const void *key, size_t key_size,
                                    const void *data, size_t size);

/**
 * Removes key. Returns PCACHE_OK if it was there, PCACHE_NOT_FOUND if not;
 * PCACHE_ERR_INVALID_ARG; PCACHE_ERR_IO; PCACHE_ERR_PERMISSION; PCACHE_ERR_BUSY; PCACHE_ERR_REMOTE
 * (a tiered cache removes from every tier it can, then reports the first failure).
 * Thread safety: safe to call concurrently.
 */
PCACHE_API pcache_status pcache_delete(pcache *cache, const void *key, size_t key_size);

/**
 * Stores the number of entries in *entries. Exact for memory and sqlite; an estimate for
 * filestream while other processes write (see docs/backends.md).
 * Redis counts with SCAN over the key prefix (O(keys in the database)); a tiered cache answers
 * with its deepest tier that responds.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG; PCACHE_ERR_IO; PCACHE_ERR_BUSY; PCACHE_ERR_REMOTE.
 */
PCACHE_API pcache_status pcache_count(pcache *cache, uint64_t *entries);

/**
 * Stores the sum of the stored payload sizes in *bytes (what max_size_bytes caps).
 * Same exactness and statuses as pcache_count().
 */
PCACHE_API pcache_status pcache_size(pcache *cache, uint64_t *bytes);

/**
 * Removes every entry. Persistent backends delete entries inside the storage (never by
 * removing the database file or directory, which other processes may hold open).
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG; PCACHE_ERR_IO; PCACHE_ERR_PERMISSION; PCACHE_ERR_BUSY;
 * PCACHE_ERR_REMOTE (a tiered cache clears every tier it can, then reports the first failure).
 */
PCACHE_API pcache_status pcache_clear(pcache *cache);

/** Counters of one handle since it was opened. Fill struct_size before pcache_get_stats(). */
typedef struct pcache_stats {
  uint32_t struct_size;   /* the caller's sizeof(pcache_stats) */
  uint32_t reserved;      /* 0 */
  uint64_t hits;          /* get/get_into/get_view calls that returned a value */
  uint64_t misses;        /* ... that returned PCACHE_NOT_FOUND (corrupt entries included) */
  uint64_t puts;          /* successful puts */
  uint64_t deletes;       /* deletes that removed an entry */
  uint64_t evictions;     /* entries evicted by the size cap */
  uint64_t bytes_read;    /* payload bytes returned by hits */
  uint64_t bytes_written; /* payload bytes stored by puts */
  uint64_t corrupt;       /* damaged entries (or database resets) found and removed */
  uint64_t healed;        /* cached images the driver rejected, removed and recompiled */
  uint64_t tier_errors;   /* tiered caches: calls on a tier that failed and were skipped */
  uint64_t tier_skips;    /* tiered caches: calls not sent to a remote tier in back-off */
  /* version 0.4 (104 bytes): */
  uint64_t uncacheable; /* compiles not stored: a computed #include, __DATE__/__TIME__, a header
                           changed during the compile, a failed store (see docs/keys.md) */
  /* later versions append uint64_t fields here */
} pcache_stats;

/**
 * Zeroes the first struct_size bytes of *stats (pass sizeof(pcache_stats)) and sets
 * stats->struct_size, ready for pcache_get_stats().
 * Thread safety: touches only *stats.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG if stats is NULL or struct_size < 72.
 * Since 0.4 (symbol version PCACHE_1.1).
 */
PCACHE_API pcache_status pcache_stats_init(pcache_stats *stats, uint32_t struct_size);

/**
 * Copies the handle's counters into the first stats->struct_size bytes of *stats. Counters are
 * updated atomically and cost a relaxed atomic add per operation.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL pointers, struct_size < 72, the size of the
 * first version of the struct).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_get_stats(pcache *cache, pcache_stats *stats);

/**
 * Copies the counters of one tier of a "tiered:" cache into *stats, like pcache_get_stats():
 * tier 0 is the first URI after "tiered:" (the fastest). The counters are the tier's own: a get
 * served by tier 1 counts a miss in tier 0 and a hit in tier 1 (and a put in tier 0, the copy
 * made on the way up); tier_errors and tier_skips are that tier's. A cache that is not tiered
 * has one tier, itself.
 * Returns PCACHE_OK; PCACHE_NOT_FOUND if tier is not below the number of tiers (so a caller can
 * enumerate them); PCACHE_ERR_INVALID_ARG (NULL pointers, struct_size < 72).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_get_tier_stats(pcache *cache, uint32_t tier, pcache_stats *stats);

/**
 * The counters every process using a cache's storage shares (SQLite and file-stream keep them
 * in the store, Redis in a hash; a memory: cache in the handle), as `progcache stats` shows
 * them. Fill struct_size (or use pcache_stats_init's rule: zero it, set struct_size).
 */
typedef struct pcache_shared_stats {
  uint32_t struct_size;     /* the caller's sizeof(pcache_shared_stats) */
  uint32_t reserved;        /* 0 */
  int64_t hits;             /* lookups answered from the cache (compile waiters included) */
  int64_t misses;           /* lookups that were not */
  int64_t evictions;        /* entries removed by a size cap */
  int64_t compile_us_saved; /* NVRTC time hits spared, by the original compiles' durations */
  int64_t corrupt;          /* damaged or forged records found and removed */
  int64_t uncacheable;      /* compiles not stored (an uncacheable program, a failed store) */
  int64_t tier_errors;      /* tiered caches: calls on a tier that failed (a remote tier down or
                               slow, a local one busy), recorded in the tiers that answered */
  int64_t tier_timeouts;    /* ...of which a remote tier did not answer within its timeout_ms */
  /* version 0.5 (80 bytes): */
  int64_t healed; /* cached images the driver rejected, removed and replaced by a fresh compile */
  /* later versions append int64_t fields here */
} pcache_shared_stats;

/**
 * Flushes this handle's own counts to the storage, then reads the counters every process using
 * it shares into the first stats->struct_size bytes of *stats. Unlike pcache_get_stats() (this
 * handle since it opened), these survive the process and add up across processes. For a
 * tiered cache, each tier keeps its own: open a tier by its own URI (or see
 * pcache_admin_tier()); the tiered handle itself answers PCACHE_ERR_UNSUPPORTED.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL stats, struct_size
 * smaller than 72, the first version of the struct); PCACHE_ERR_UNSUPPORTED (a tiered handle);
 * PCACHE_ERR_IO, PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE (the storage cannot be read).
 * Thread safety: safe concurrently with any operation on the handle.
 * Since 0.4 (symbol version PCACHE_1.1).
 */
PCACHE_API pcache_status pcache_get_shared_stats(pcache *cache, pcache_shared_stats *stats);

/** Returns a static, never-NULL description of status; unknown values give "unknown status". */
PCACHE_API const char *pcache_status_string(pcache_status status);

/**
 * Returns the outcome of the calling thread's most recent pcache_* call: the reason it failed,
 * or a warning from a call that succeeded (a damaged entry removed, a corrupt database reset, WAL
 * disabled on a network filesystem), or "" if it succeeded cleanly. Every call resets it.
 * Never NULL. The text stays valid until the thread's next pcache_* call; copy it to keep it.
 * Thread-local: one thread never sees another's error.
 */
PCACHE_API const char *pcache_last_error(void);

/** What is known of a failure's cause beyond its status (pcache_error_info.cause). */
enum {
  PCACHE_CAUSE_NONE = 0,           /* nothing more specific (or the call succeeded) */
  PCACHE_CAUSE_NO_SPACE = 1,       /* the file system or a quota is full: ENOSPC, EDQUOT, a file
                                      size limit (EFBIG), SQLITE_FULL */
  PCACHE_CAUSE_DEVICE = 2,         /* the device failed a read or write: EIO, SQLITE_IOERR_* */
  PCACHE_CAUSE_READ_ONLY = 3,      /* a read-only file system or database: EROFS, SQLITE_READONLY */
  PCACHE_CAUSE_TIMEOUT = 4,        /* a wait ran out: a remote store's timeout_ms, a lock held
                                      past busy_timeout_ms */
  PCACHE_CAUSE_TOO_MANY_FILES = 5, /* the process or system is out of file descriptors */
  PCACHE_CAUSE_CONNECTION = 6      /* a remote store refused, dropped or could not be reached */
};

/** The cause of the calling thread's last pcache_* call's outcome (pcache_last_error_info). */
typedef struct pcache_error_info {
  uint32_t struct_size; /* the caller's sizeof(pcache_error_info) */
  int32_t status;       /* that call's pcache_status */
  int32_t cause;        /* PCACHE_CAUSE_*; later releases may add values: treat others as NONE */
  int32_t os_errno;     /* the errno behind it, or 0 */
  int32_t sqlite_code;  /* SQLite's extended result code behind it (SQLITE_IOERR_WRITE is 778,
                           SQLITE_FULL 13), or 0 */
  /* later versions append fields here */
} pcache_error_info;

/**
 * Fills the first info->struct_size bytes of *info with what the calling thread's most recent
 * pcache_* call knew of its outcome: its status and, for a failure, the cause a program can act
 * on (a full disk is not a failing one) and the numbers behind it, so that callers need not
 * parse pcache_last_error()'s text. Like pcache_last_error() it is thread-local, and it changes
 * neither: call it right after the call it is about.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (info NULL, or struct_size smaller than 20, the first
 * version of the struct).
 * Since 0.5 (symbol version PCACHE_1.2).
 */
PCACHE_API pcache_status pcache_last_error_info(pcache_error_info *info);

/** Returns PCACHE_VERSION_NUMBER of the library actually loaded (for dlopen callers). */
PCACHE_API uint32_t pcache_version(void);

/** Returns PCACHE_VERSION_STRING of the library actually loaded; static, never NULL. */
PCACHE_API const char *pcache_version_string(void);

/* ---- Cache keys ---------------------------------------------------------------------------- */

/* pcache_program.code_type: what compiles it. CXX: CUDA C++ through NVRTC. PTX: PTX text to a
 * cubin through nvJitLink (options are nvJitLink's: -arch=sm_XX, -O3, -lineinfo...). NVVM: NVVM
 * IR (text, or bitcode with source_size) through libNVVM to PTX, or LTO-IR (-gen-lto, added for
 * PCACHE_TARGET_LTOIR); the header slots hold the extra modules, linked in order, and the
 * option -use-libdevice (progcache's) links the toolkit's libdevice lazily. */
enum { PCACHE_CODE_CXX = 0, PCACHE_CODE_PTX = 1, PCACHE_CODE_NVVM = 2 };
/* pcache_program.target */
enum { PCACHE_TARGET_CUBIN = 0, PCACHE_TARGET_PTX = 1, PCACHE_TARGET_LTOIR = 2 };

/**
 * Everything that decides what a compile produces. Fill it with pcache_program_init(&p,
 * sizeof p) (or zero it and set struct_size to sizeof(pcache_program)), then set the fields you
 * use. Pointers are only read during a call. The struct grows at its end (docs/ABI.md): a caller
 * built against an older header keeps working, and one built against a newer header that sets
 * a field this library does not know is refused (PCACHE_ERR_UNSUPPORTED) rather than compiled
 * without it.
 */
typedef struct pcache_program {
  uint32_t struct_size;   /* the caller's sizeof(pcache_program) */
  int32_t code_type;      /* PCACHE_CODE_* */
  int32_t target;         /* PCACHE_TARGET_* */
  uint32_t nvrtc_version; /* pcache_make_key only (pcache_compile identifies the NVRTC build
                             itself): major*1000 + minor*10 (13.0 -> 13000); 0 = unknown */
  const char *
      name; /* program name (NVRTC resolves quoted includes against it); NULL = "default_program" */
  const char *source;         /* the code; required */
  size_t source_size;         /* bytes of source; 0 = NUL-terminated. CUDA C++ may end in NULs
                                 but hold none before (NVRTC would stop there) */
  const char *const *options; /* NVRTC options, in order */
  size_t num_options;
  const char *const *header_names;   /* in-memory headers (names), num_headers entries */
  const char *const *header_sources; /* their NUL-terminated contents */
  size_t num_headers;
  const char *const *name_expressions; /* e.g. "my_kernel<float>"; order does not matter */
  size_t num_name_expressions;
  const void *extra_digest; /* a fingerprint of inputs the key cannot see, keyed as given (a
                               computed #include for pcache_make_key; a compile observes
                               NVRTC and needs none); may be NULL */
  size_t extra_digest_size;
  /* version 0.5 (120 bytes): */
  const size_t *header_sizes; /* bytes of each header_sources entry, for NVVM modules given as
                                 bitcode (which holds NULs); NULL = each is NUL-terminated.
                                 CUDA C++ headers, like the source, may hold none but trailing */
  /* later versions append fields here, never reorder */
} pcache_program;

/**
 * Zeroes the first struct_size bytes of *program (pass sizeof(pcache_program)) and sets
 * program->struct_size: the defaults are C++, cubin, no options. A struct_size larger than this
 * library's struct (a newer caller) is accepted and zeroed whole.
 * Thread safety: touches only *program.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG if program is NULL or struct_size is smaller than
 * the first version of the struct (112 bytes on 64-bit platforms).
 * Since 0.4 (symbol version PCACHE_1.1).
 */
PCACHE_API pcache_status pcache_program_init(pcache_program *program, uint32_t struct_size);

/**
 * Derives the PCACHE_KEY_SIZE-byte cache key of program into key_out (a caller buffer of at
 * least PCACHE_KEY_SIZE bytes), without compiling: for callers that store and fetch results
 * themselves with pcache_put()/pcache_get(). The key is BLAKE2b (OpenSSL) over a tag-and-length
 * encoding of every field plus a key-schema version; under OpenSSL FIPS mode, which has no
 * BLAKE2b, SHA-256 under a distinct schema tag. Spellings and orders of options NVRTC treats
 * alike give one key (docs/keys.md lists the canonicalisations). The headers the source would
 * include from disk are predicted by an include scan (beside the program name, on -I paths,
 * absolute paths, whatever #if says) and their contents keyed, as are the places NVRTC would
 * look that hold nothing. program->nvrtc_version is keyed as given: this key does not identify
 * the NVRTC build, so it differs from pcache_compile()'s (which keys what NVRTC was seen to read).
 * A key's bytes change only with its schema: 0.5 made these keys schema 5 (the fields and the
 * source in one digest, about the source's own BLAKE2b), so a value stored under a key from 0.4's
 * pcache_make_key is missed once (docs/keys.md, "Keys without a compile").
 * Refused with PCACHE_ERR_INVALID_ARG (message says which): a program the scan cannot key
 * (__DATE__ or __TIME__; a computed #include or a __has_include operand built by macros, without
 * extra_digest; an unreadable header); options with effects beyond the output (--create-pch,
 * --time, --fdevice-time-trace, --gpu-architecture=native); an unknown code_type/target; NULL
 * source; an option missing its value.
 * Memory: a source of 16 KiB to 4 MiB keyed a second time is copied and kept (16 MiB of sources
 * in all per process), so that keying the same bytes again costs a comparison instead of a hash;
 * the key is the same either way (docs/keys.md).
 * Thread safety: safe from any thread; reads the included headers from disk. A new source of
 * 256 KiB or more, where the calling thread may run on more than one CPU, is scanned on a thread
 * the call starts and joins before it returns, while the caller's hashes it (the caller waits for
 * about the hash alone; without a thread to be had, or with one such thread per CPU but one
 * already running in the process, both run on the caller's).
 * Returns PCACHE_OK, PCACHE_ERR_INVALID_ARG, PCACHE_ERR_NO_MEMORY, PCACHE_ERR_UNSUPPORTED (no
 * loadable libcrypto; the message names it), PCACHE_ERR_INTERNAL.
 */
PCACHE_API pcache_status pcache_make_key(const pcache_program *program, uint8_t *key_out);

/* ---- Compiling through the cache ------------------------------------------------------------ */

/** The outcome of pcache_compile(): the binary and what describes it. Opaque. */
typedef struct pcache_compiled pcache_compiled;

/**
 * Compiles program with NVRTC through cache: returns the stored result on a hit without loading
 * NVRTC, otherwise compiles, stores the result with its metadata (lowered names, log, compile
 * time) and returns it. When several threads or processes, or machines sharing a Redis tier,
 * miss the same program at once, one compiles and the others wait for its result (bounded;
 * past the bound they compile themselves); threads wait only for a compile on the same handle.
 * A hit is always what a compile without the cache would return now, status and log included
 * (docs/keys.md): the key covers the program, the exact NVRTC build (the GNU build-ids of
 * libnvrtc and its builtins library, read from the files; program->nvrtc_version is ignored),
 * the variables of the environment NVRTC reads, and what NVRTC was seen to read when it compiled
 * the program: every header it opened (by content), every place it looked that held nothing,
 * which paths were one file, and the program name and working directory where the output holds
 * them. A compile is found again only while all of that still holds.
 * NVRTC is found without loading it ($PCACHE_NVRTC_LIBRARY, else the newest libnvrtc.so.N in
 * the CUDA and system library directories).
 * A compile NVRTC refuses the same way every time (a compilation error, an unknown option, a
 * name expression it cannot lower, a PTX target with -dlto, which makes no PTX) is stored too,
 * and answered warm as cold: PCACHE_ERR_COMPILE with the same log.
 * Uncacheable programs are compiled and returned but never stored, with a warning in
 * pcache_last_error() and pcache_stats.uncacheable counting them: __DATE__/__TIME__ reachable
 * from the source, an option or a header; a file NVRTC wrote (--create-pch, --time); a header
 * that changed during the compile; an NVRTC progcache cannot observe.
 *
 * cache may be NULL to compile without caching; $PCACHE_DISABLE=1 has the same effect (any value
 * but empty, 0, false, no or off, in any case).
 * CUDA C++ compiles with NVRTC (PCACHE_TARGET_LTOIR adds -dlto when the options lack it); PTX
 * (PCACHE_CODE_PTX, to PCACHE_TARGET_CUBIN) links with nvJitLink, NVVM IR (PCACHE_CODE_NVVM, to
 * PCACHE_TARGET_PTX or _LTOIR) compiles with libNVVM: both keyed by everything they are given
 * (options as given, every module in order, libdevice's digest with -use-libdevice) and the
 * library's exact build, and a hit loads neither library. Their refusals are not stored.
 * On success *out receives a new result (pcache_compiled_from_cache tells hit or miss).
 * On PCACHE_ERR_COMPILE *out also receives a result, whose pcache_compiled_log() holds NVRTC's
 * full log (also in pcache_last_error()) and whose data is empty.
 * On any other error *out is NULL.
 * Ownership: *out belongs to the caller; release it with pcache_compiled_free().
 * Thread safety: safe to call concurrently, on one cache or several.
 * Returns PCACHE_OK; PCACHE_ERR_COMPILE; PCACHE_ERR_INVALID_ARG (an option missing its value,
 * NULL out, a closed handle, a CUDA C++ source or in-memory header with a NUL before its end);
 * PCACHE_ERR_UNSUPPORTED (a newer struct's field this library does not know; no loadable
 * libcrypto); PCACHE_ERR_CUDA_UNAVAILABLE (no loadable NVRTC; the message lists the paths tried);
 * PCACHE_ERR_NO_MEMORY; PCACHE_ERR_IO/BUSY from the cache on a lookup (a failed store after a
 * compile is only a warning in pcache_last_error()); PCACHE_ERR_INTERNAL.
 */
PCACHE_API pcache_status pcache_compile(pcache *cache, const pcache_program *program,
                                        pcache_compiled **out);

/** The compiled binary (cubin, PTX with its NUL, or LTO-IR); *size gets its length (size may be
 * NULL). Valid until pcache_compiled_free(result). NULL result: NULL. */
PCACHE_API const void *pcache_compiled_data(const pcache_compiled *result, size_t *size);

/** 1 if the binary came from the cache (no NVRTC call in this call), 0 if it was compiled now. */
PCACHE_API int32_t pcache_compiled_from_cache(const pcache_compiled *result);

/** NVRTC's log of the compile that produced the binary (kept in the cache); never NULL. */
PCACHE_API const char *pcache_compiled_log(const pcache_compiled *result);

/**
 * The lowered (mangled) symbol of one of the program's name expressions, e.g.
 * "_Z5scaleIfEvPT_S0_i" for "scale<float>", the same on a hit as after a fresh compile; NULL if
 * the expression was not among the program's name_expressions. Valid until the result is freed.
 */
PCACHE_API const char *pcache_compiled_lowered_name(const pcache_compiled *result,
                                                    const char *name_expression);

/**
 * The PCACHE_KEY_SIZE-byte key of the result: the key it is stored under, or for a compile
 * without a cache (NULL, PCACHE_DISABLE=1) the key a cache would have stored it under. It covers
 * what NVRTC was seen to read, so a hit has the key of the compile that stored it (the same unless
 * NVRTC read otherwise then, e.g. before a precompiled header existed). A compile that cannot be
 * stored (the time in its output, a failure that is not stored) has the key of its program and
 * NVRTC build. Valid until the result is freed.
 */
PCACHE_API const uint8_t *pcache_compiled_key(const pcache_compiled *result);

/** NVRTC version that produced the binary (major*1000 + minor*10). */
PCACHE_API uint32_t pcache_compiled_nvrtc_version(const pcache_compiled *result);

/** Microseconds the original NVRTC compile took (what a hit saves). */
PCACHE_API uint64_t pcache_compiled_compile_us(const pcache_compiled *result);

/** Microseconds this pcache_compile() call took, end to end. */
PCACHE_API uint64_t pcache_compiled_elapsed_us(const pcache_compiled *result);

/** Releases a result. NULL is a no-op. */
PCACHE_API void pcache_compiled_free(pcache_compiled *result);

/* ---- Linking -------------------------------------------------------------------------------- */

/* pcache_link_input.kind: what nvJitLink is given. */
enum {
  PCACHE_INPUT_CUBIN = 0,
  PCACHE_INPUT_PTX = 1,
  PCACHE_INPUT_LTOIR = 2,
  PCACHE_INPUT_FATBIN = 3,
  PCACHE_INPUT_OBJECT = 4, /* a host object holding device code */
  PCACHE_INPUT_LIBRARY = 5 /* a host static library holding device code */
};

/** One input of a link. Every element of an array of them has the same struct_size. */
typedef struct pcache_link_input {
  uint32_t struct_size; /* the caller's sizeof(pcache_link_input) */
  int32_t kind;         /* PCACHE_INPUT_* */
  const char *name;     /* for the linker's messages (NULL = "input<i>"); keyed */
  const void *data;     /* the bytes; required */
  size_t size;          /* bytes of data (PTX: its NUL need not be counted) */
  /* later versions append fields here */
} pcache_link_input;

/** A link: inputs in order, nvJitLink's options, and what to make. */
typedef struct pcache_link_job {
  uint32_t struct_size;       /* the caller's sizeof(pcache_link_job) */
  int32_t target;             /* PCACHE_TARGET_CUBIN, or PCACHE_TARGET_PTX (from LTO-IR inputs,
                                 with -lto; -ptx is added when absent) */
  const char *const *options; /* nvJitLink's: -arch=sm_XX (required), -lto, -O3, -lineinfo... */
  size_t num_options;
  const pcache_link_input *inputs;
  size_t num_inputs;
  /* later versions append fields here */
} pcache_link_job;

/**
 * Zeroes the first struct_size bytes of *job (pass sizeof(pcache_link_job)) and sets
 * job->struct_size: a cubin target, no options, no inputs.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG if job is NULL or struct_size is smaller than the
 * first version of the struct (40 bytes on 64-bit platforms).
 * Since 0.5 (symbol version PCACHE_1.2).
 */
PCACHE_API pcache_status pcache_link_job_init(pcache_link_job *job, uint32_t struct_size);

/**
 * Links job's inputs through cache with nvJitLink (libnvJitLink.so.N, found and opened like
 * NVRTC; $PCACHE_NVJITLINK_LIBRARY overrides), as cuda.core's Linker does: LTO-IR from NVRTC
 * -dlto or libNVVM -gen-lto, PTX, cubins, fatbins, host objects and libraries. Keyed by each
 * input's kind, name and content in order, the options as given, the target and nvJitLink's
 * exact build (its GNU build-id); a hit loads no nvJitLink. The result is a pcache_compiled
 * (data, from_cache, log, key; pcache_compiled_nvrtc_version gives nvJitLink's version), with
 * the same single flight, statistics and listing as compiles. A link nvJitLink refuses returns
 * PCACHE_ERR_COMPILE with a result whose log holds nvJitLink's error log and the refusing call;
 * nothing is stored.
 * cache may be NULL to link without caching; $PCACHE_DISABLE=1 has the same effect.
 * Ownership: *out belongs to the caller; release it with pcache_compiled_free(). On errors other
 * than PCACHE_ERR_COMPILE *out is NULL.
 * Thread safety: safe to call concurrently, on one cache or several.
 * Returns PCACHE_OK; PCACHE_ERR_COMPILE; PCACHE_ERR_INVALID_ARG (NULL job or out, a struct_size
 * too small or differing between inputs, an unknown kind or target, NULL data, no inputs);
 * PCACHE_ERR_UNSUPPORTED (a struct from a newer header that sets a field this library does not
 * know; no loadable libcrypto); PCACHE_ERR_CUDA_UNAVAILABLE (no loadable nvJitLink; the message
 * lists the paths tried);
 * PCACHE_ERR_NO_MEMORY; PCACHE_ERR_IO/BUSY from the cache on a lookup.
 * Since 0.5 (symbol version PCACHE_1.2).
 */
PCACHE_API pcache_status pcache_link(pcache *cache, const pcache_link_job *job,
                                     pcache_compiled **out);

/* ---- Loading modules ------------------------------------------------------------------------ */

/** A CUDA module loaded from a compiled result. Opaque. */
typedef struct pcache_module pcache_module;

/**
 * Compiles program through cache (as pcache_compile) and loads the cubin or PTX with
 * cuModuleLoadData into the calling thread's current CUDA context, or, when the thread has none,
 * into device 0's primary context, which it then makes current.
 * The driver (libcuda.so.1, or $PCACHE_LIBCUDA) is loaded with dlopen and cuInit(0) is called
 * once per process.
 * Self-healing: if the driver rejects a binary that came from the cache (CUDA_ERROR_INVALID_IMAGE,
 * CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_INVALID_PTX, CUDA_ERROR_UNSUPPORTED_PTX_VERSION), the
 * entry is removed, the program recompiled once and the fresh binary loaded; the handle's
 * pcache_stats.healed counts it.
 * Ownership: *out belongs to the caller; pcache_module_unload() unloads and frees it.
 * Thread safety: safe to call concurrently (CUDA's own context rules apply).
 * Returns PCACHE_OK; the statuses of pcache_compile(); PCACHE_ERR_CUDA_UNAVAILABLE (no driver,
 * the toolkit's stub library, no device: the message is the driver's own);
 * PCACHE_ERR_CUDA (the driver refused the module: the message names the CUresult);
 * An LTO-IR target (NVRTC -dlto, libNVVM -gen-lto) is linked through the cache with nvJitLink
 * (pcache_link of that one input with -arch=sm_XX from the program's options and -lto) and the
 * linked cubin loaded; pcache_module_compiled() is then the link's result. The program must
 * name its architecture (PCACHE_ERR_INVALID_ARG otherwise).
 */
PCACHE_API pcache_status pcache_load_module(pcache *cache, const pcache_program *program,
                                            pcache_module **out);

/** The CUmodule, as a pointer: CUmodule m = (CUmodule)pcache_module_handle(module). */
PCACHE_API void *pcache_module_handle(const pcache_module *module);

/** The compiled result the module was loaded from (owned by the module). */
PCACHE_API const pcache_compiled *pcache_module_compiled(const pcache_module *module);

/**
 * Looks a kernel up by name expression (resolved through the stored lowered names, so
 * "scale<float>" works after a cache hit) or by its plain symbol name, and stores the
 * CUfunction in *function: CUfunction f = (CUfunction)ptr.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL arguments); PCACHE_NOT_FOUND (no such kernel);
 * PCACHE_ERR_CUDA (other driver errors).
 */
PCACHE_API pcache_status pcache_module_get_function(pcache_module *module, const char *name,
                                                    void **function);

/** Unloads the module (cuModuleUnload) and frees it. NULL: no-op, PCACHE_OK.
 * Returns PCACHE_OK or PCACHE_ERR_CUDA (the module is freed regardless). */
PCACHE_API pcache_status pcache_module_unload(pcache_module *module);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PROGCACHE_PROGCACHE_H */
