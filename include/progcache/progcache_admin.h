/*
 * progcache administration API: UNSTABLE.
 *
 * What the `progcache` command needs beyond the application API of progcache.h: walk and
 * inspect entries without counting them as use, the counters every process shares, each tier of
 * a tiered cache, why a program would miss, bundles, and the library's own parsers for sizes and
 * durations. It is walled off the way zstd walls off ZSTD_STATIC_LINKING_ONLY: a caller must
 * define PCACHE_ADMIN_UNSTABLE before including this header, and accepts that:
 *
 * - These functions live in their own symbol version node, PCACHE_ADMIN_0.5, named after the
 *   release whose admin API it is. Any release may change them; when it does, the node is
 *   renamed (PCACHE_ADMIN_0.5), so a program built against another admin API fails at load time
 *   ("version `PCACHE_ADMIN_0.5' not found") instead of calling a function whose contract moved.
 *   The application API of progcache.h is not affected (docs/ABI.md).
 * - The general rules at the top of progcache.h hold here too: statuses, NULL arguments,
 *   pcache_last_error(), ownership, threads, closed handles, no C++ exception crossing.
 *
 * "Peek" below means an administrative read: it verifies the record like a get (checksum, MAC
 * with a secret) but counts no hit or miss and refreshes no recency, so listing or verifying a
 * cache never changes which entries its size cap evicts next. A damaged record it finds is
 * removed and counted in pcache_stats.corrupt, as a get would.
 */
#ifndef PROGCACHE_PROGCACHE_ADMIN_H
#define PROGCACHE_PROGCACHE_ADMIN_H

#ifndef PCACHE_ADMIN_UNSTABLE
#error "progcache_admin.h is an unstable API: define PCACHE_ADMIN_UNSTABLE to use it (see its top)"
#endif

#include "progcache/progcache.h"

#ifdef __cplusplus
extern "C" {
#endif

/** What a handle is: filled by pcache_admin_info(). Strings are owned by the handle. */
typedef struct pcache_admin_info {
  uint32_t struct_size;      /* the caller's sizeof(pcache_admin_info) */
  uint32_t tier_count;       /* tiers of a "tiered:" cache; 0 for any other */
  const char *uri;           /* the URI opened, a password replaced by "***" */
  const char *scheme;        /* "memory", "sqlite", "filestream", "redis" or "tiered" */
  uint64_t max_size_bytes;   /* the size cap this handle applies; 0 = none */
  uint64_t max_payload_size; /* the largest payload the storage takes */
  /* the cap the configuration gives this cache (what a handle opened with
     PCACHE_MAX_SIZE_CONFIGURED applies), whatever this handle was opened with; 0 = none */
  uint64_t configured_max_size;
  /* where configured_max_size comes from: "URI (?max_size=)", "environment (PCACHE_MAX_SIZE)",
     "the cache (progcache config)", a config file's path, "the default for the default cache",
     or "" (none) */
  const char *max_size_source;
} pcache_admin_info;

/**
 * Describes the handle: its URI for display, its kind, its tiers and caps. Reads the cap stored
 * in the cache, so it touches the storage.
 * The strings stay valid until the next pcache_admin_info_get() on the handle or its close (for
 * a tier handle: its cache's close).
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL info, or
 * info->struct_size smaller than sizeof(pcache_admin_info) of this release; a malformed
 * $PCACHE_MAX_SIZE or config file max_size).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_info_get(pcache *cache, pcache_admin_info *info);

/**
 * Stores in *tier_out a handle on tier `tier` of a "tiered:" cache (0 = the first URI after
 * "tiered:"). Every function taking a pcache handle works on it and acts on that tier's storage
 * alone: a put lands in that tier only, a count counts that tier. The tier handle belongs to
 * cache: it is valid until pcache_close(cache), and pcache_close() on the tier handle itself is
 * PCACHE_ERR_INVALID_ARG. Asking twice for the same tier returns the same handle.
 * Returns PCACHE_OK; PCACHE_NOT_FOUND if tier is not below pcache_admin_info.tier_count (0 for
 * a cache that is not tiered); PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL tier_out).
 * Thread safety: safe concurrently with any operation on the handle but its close.
 */
PCACHE_API pcache_status pcache_admin_tier(pcache *cache, uint32_t tier, pcache **tier_out);

/**
 * Writes uri with every file path in it made absolute from the working directory (sqlite:,
 * filestream:, each tier of tiered:; a leading "~/" as the home, as pcache_open() reads it;
 * parameters kept; other schemes unchanged), for handing a URI to another process that may
 * change directory (`progcache run` exports it as PCACHE_URI). *size is the size of out on
 * entry and the size needed (with the NUL) on return.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL uri or size, not a cache URI, a "~user/" path
 * or a "~/" one with no home, out NULL or too small: *size then says how much is needed);
 * PCACHE_ERR_IO (the working directory is gone).
 * Thread safety: any thread. Since 0.5.
 */
PCACHE_API pcache_status pcache_admin_absolute_uri(const char *uri, char *out, size_t *size);

/**
 * Checks the storage's own structures, which reading every entry cannot see: SQLite's
 * integrity_check (a damaged index makes lookups miss while every entry reads well) and whether the
 * stored totals match the entries. With repair != 0 it mends what it found: indexes rebuilt
 * (entries kept), totals recounted; damage that survives a rebuild resets the database, as any
 * damage does. *damaged receives 1 when something was found, and pcache_last_error() then
 * describes what was found and done; 0 when all is well. A tiered cache checks every tier;
 * stores without such structures (memory, file-stream, Redis) report nothing.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL damaged);
 * PCACHE_ERR_IO, PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE.
 * Thread safety: safe concurrently with any operation on the handle.
 * Since 0.5.
 */
PCACHE_API pcache_status pcache_admin_check_storage(pcache *cache, int32_t repair,
                                                    int32_t *damaged);

/**
 * Sets the shared counters (pcache_get_shared_stats()) to zero (ccache -z); entries and
 * pcache_get_stats() counts stay.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG; PCACHE_ERR_UNSUPPORTED (a tiered handle: zero each
 * tier); PCACHE_ERR_IO, PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE when the storage cannot be written.
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_zero_shared_stats(pcache *cache);

/** Called once per setting by pcache_admin_config_list(). Must not throw or longjmp. */
typedef void (*pcache_setting_fn)(const char *name, const char *value, const char *source,
                                  void *context);

/**
 * Lists the settings that apply to this cache, each with its value ("" when unset) and where it
 * comes from ("" when unset, "environment (PCACHE_X)", a config file's path, "the cache
 * (progcache config)", "URI (?max_size=)", "the default for the default cache"): cache_uri,
 * max_size (in bytes), secret_file, allow_shared, umask, then config_files (the files looked
 * at, ':'-separated). A config file that
 * cannot be parsed or names an unknown setting is reported as a warning in pcache_last_error().
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL fn, a malformed size);
 * PCACHE_ERR_IO, PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE (the stored cap cannot be read).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_config_list(pcache *cache, pcache_setting_fn fn,
                                                  void *context);

/**
 * Stores a setting in the cache itself, for every process that opens it. Only "max_size" can be
 * stored: value is a size (pcache_admin_parse_size(); "0" = unbounded) or NULL/"" to remove the
 * stored cap. It is signed with the cache's secret when it has one, so a writer without the
 * secret cannot change it. This handle's own cap does not change; handles opened later with
 * PCACHE_MAX_SIZE_CONFIGURED apply it unless a URI or $PCACHE_MAX_SIZE gives another.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL or closed handle, NULL name, a value that is
 * not a size); PCACHE_ERR_UNSUPPORTED (another name: set it in a config file or the
 * environment; a tiered handle: store it in each tier); PCACHE_ERR_IO, PCACHE_ERR_BUSY,
 * PCACHE_ERR_PERMISSION, PCACHE_ERR_REMOTE (the storage cannot be written).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_config_set(pcache *cache, const char *name,
                                                 const char *value);

/** One entry as pcache_admin_list() reports it. Pointers are valid during the callback only. */
typedef struct pcache_entry_info {
  const void *key;
  size_t key_size;
  uint64_t payload_size; /* as the storage records it (a damaged entry may claim any size) */
  int64_t last_use;      /* Unix seconds of the last put or use; 0 when the storage keeps none */
} pcache_entry_info;

/**
 * Called once per entry by pcache_admin_list(). Return 0 to go on, non-zero to stop the walk.
 * It may call any function on the same handle (peek, delete...) but must not close it, throw a
 * C++ exception or longjmp out.
 */
typedef int (*pcache_list_fn)(const pcache_entry_info *entry, void *context);

/**
 * Calls fn for every entry, most recently used first where the storage keeps an order, without
 * reading payloads or counting anything. Entries put or removed during the walk may or may not
 * be reported; none is reported twice. The library's internal records (memos) are not entries.
 * Returns PCACHE_OK (also when fn stopped the walk); PCACHE_ERR_INVALID_ARG (NULL or closed
 * handle, NULL fn); PCACHE_ERR_IO, PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE.
 * Thread safety: safe concurrently with any operation on the handle but its close.
 */
PCACHE_API pcache_status pcache_admin_list(pcache *cache, pcache_list_fn fn, void *context);

/** A verified entry read by pcache_admin_peek(); free it with pcache_entry_free(). */
typedef struct pcache_entry pcache_entry;

/**
 * Peeks at the entry stored under key (see the top of this header: no hit, miss or recency) and
 * stores it in *out, with the compile metadata it carries when pcache_compile() stored it.
 * Returns PCACHE_OK; PCACHE_NOT_FOUND (no such entry; *out NULL); PCACHE_ERR_CORRUPT (the
 * stored record was damaged, forged or unsigned under a secret: it has been removed, counted in
 * pcache_stats.corrupt, and pcache_last_error() says what was wrong; *out NULL);
 * PCACHE_ERR_INVALID_ARG (NULL or closed handle, bad key, NULL out); PCACHE_ERR_IO,
 * PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE.
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_peek(pcache *cache, const void *key, size_t key_size,
                                           pcache_entry **out);

/** The entry's payload and its size in *size (size may be NULL); owned by entry. */
PCACHE_API const void *pcache_entry_payload(const pcache_entry *entry, size_t *size);

/**
 * Whether the entry was stored by a compile (1) and so carries the fields below, or by
 * pcache_put() (0; the fields below are then 0, -1 or empty). 0 for a NULL entry.
 */
PCACHE_API int32_t pcache_entry_is_compiled(const pcache_entry *entry);

/** The compile's pcache_target (PCACHE_TARGET_*), or -1 when not a compiled entry. */
PCACHE_API int32_t pcache_entry_target(const pcache_entry *entry);

/** The NVRTC version that compiled it (major*1000 + minor*10, e.g. 13000), or 0. */
PCACHE_API uint32_t pcache_entry_nvrtc_version(const pcache_entry *entry);

/** How long the original compile took, in microseconds, or 0. */
PCACHE_API uint64_t pcache_entry_compile_us(const pcache_entry *entry);

/** The program name it was compiled under ("" when none); owned by entry. */
PCACHE_API const char *pcache_entry_program_name(const pcache_entry *entry);

/**
 * The key fields the compile recorded (docs/keys.md: what the key covered, in words: options,
 * target, NVRTC build, "file PATH" = header digest or "absent"...). Stores arrays of
 * *count names and values, owned by entry, in *names and *values; returns PCACHE_OK, or
 * PCACHE_ERR_INVALID_ARG for a NULL argument. A put entry has none (*count 0).
 */
PCACHE_API pcache_status pcache_entry_key_fields(const pcache_entry *entry, size_t *count,
                                                 const char *const **names,
                                                 const char *const **values);

/** Frees an entry from pcache_admin_peek() (NULL is ignored). */
PCACHE_API void pcache_entry_free(pcache_entry *entry);

/** A program's key, explained: see pcache_admin_explain(). Free with pcache_explain_free(). */
typedef struct pcache_explain pcache_explain;

/**
 * Derives program's key as pcache_compile() would, without compiling: a compile is keyed by what
 * NVRTC was seen to read when it compiled the program (docs/keys.md), so the key is that of the
 * first recorded observation that still holds (asking again each question NVRTC asked), and the
 * key fields (the same words pcache_entry_key_fields() gives a stored entry, so a caller can say
 * which differ) list the program's fields and that observation's. Also: the header paths NVRTC
 * read or probed, why no observation holds (pcache_explain_why_not), and why the program cannot
 * be cached, if it cannot. cache may be NULL (nothing recorded: the paths are the include scan's
 * prediction); with one, the NVRTC identity is taken from its memo.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL program or out, a bad program, options NVRTC
 * would refuse); PCACHE_ERR_UNSUPPORTED (struct_size with unknown fields set);
 * PCACHE_ERR_CUDA_UNAVAILABLE (no NVRTC to identify).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_explain(pcache *cache, const pcache_program *program,
                                              pcache_explain **out);

/** The key (PCACHE_KEY_SIZE bytes), owned by explain; all zero for an uncacheable program and
 * when no recorded observation holds. */
PCACHE_API const uint8_t *pcache_explain_key(const pcache_explain *explain);

/** Why the program is compiled every time and never stored, or "" when it can be cached. */
PCACHE_API const char *pcache_explain_uncacheable(const pcache_explain *explain);

/**
 * Why no stored compile of program can answer a compile now (then pcache_explain_key() is all
 * zero): what NVRTC read when it compiled the program that differs now ("header inc/a.h
 * changed", "a file now exists at opt.h, where NVRTC found none"), or that the program was
 * never compiled through this cache. "" when a stored compile's observation holds (the key is
 * then the entry a compile would look up), or the program is uncacheable. Owned by explain.
 * Since 0.5.
 */
PCACHE_API const char *pcache_explain_why_not(const pcache_explain *explain);

/** The key fields (see pcache_entry_key_fields()); arrays owned by explain. */
PCACHE_API pcache_status pcache_explain_key_fields(const pcache_explain *explain, size_t *count,
                                                   const char *const **names,
                                                   const char *const **values);

/**
 * The header paths the key covers, in the order NVRTC looked, with present[i] 1 for a file that
 * was read and 0 for a place looked at that held nothing (creating a file there changes the
 * key). From the recorded observation that holds (else the newest); for a program never compiled
 * through the cache, the include scan's prediction. Arrays owned by explain. Returns PCACHE_OK
 * or PCACHE_ERR_INVALID_ARG.
 */
PCACHE_API pcache_status pcache_explain_dependencies(const pcache_explain *explain, size_t *count,
                                                     const char *const **paths,
                                                     const int32_t **present);

/** Frees an explanation (NULL is ignored). */
PCACHE_API void pcache_explain_free(pcache_explain *explain);

/**
 * Whether options (NVRTC's own, in any spelling it takes: -arch=sm_80, -arch sm_80,
 * --gpu-architecture=..., -arch=native) name a GPU architecture: *names_arch 1 or 0. The key's
 * option table decides, so the answer matches what the key sees.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL arguments, or an option NVRTC would refuse;
 * pcache_last_error() names it).
 * Thread safety: none needed (no state).
 */
PCACHE_API pcache_status pcache_admin_options_name_arch(const char *const *options,
                                                        size_t num_options, int32_t *names_arch);

/** Why a successful compile was not stored ("" when it was, or for a hit); owned by result. */
PCACHE_API const char *pcache_admin_compiled_not_stored(const pcache_compiled *result);

/** Progress and outcome of pcache_admin_export() / pcache_admin_import(). */
typedef struct pcache_transfer {
  uint64_t entries;       /* exported, or imported and stored */
  uint64_t payload_bytes; /* their payload bytes */
  uint64_t rejected;      /* import: records that failed verification and were not stored */
  uint64_t file_bytes;    /* bundle bytes written or read so far */
} pcache_transfer;

/** Called about once a second during an export or import. Must not throw or longjmp. */
typedef void (*pcache_progress_fn)(const pcache_transfer *so_far, void *context);
/** Called for each bundle record an import rejects, with why. Must not throw or longjmp. */
typedef void (*pcache_reject_fn)(const char *reason, void *context);

/**
 * Writes every entry (payload and metadata, verified by a peek, compressed, signed with the
 * cache's secret) to the bundle file at path ("-" = standard output), through a temporary file
 * renamed into place (over a symlink's target), so a failed export leaves no partial bundle; a
 * path that exists and is not a regular file (a FIFO, a device) is written in place, never
 * replaced. progress may be NULL.
 * *result (may be NULL) receives what was written.
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (path is a file the cache owns or will own: its
 * database, WAL, lock directory or anything in it, anything in a file-stream directory);
 * PCACHE_ERR_IO (cannot write path);
 * PCACHE_ERR_BUSY, PCACHE_ERR_REMOTE (cannot read the cache).
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_export(pcache *cache, const char *path,
                                             pcache_progress_fn progress, void *context,
                                             pcache_transfer *result);

/**
 * Verifies every record of the bundle at path ("-" = standard input): checksum, and MAC when the
 * cache has a secret. Good records are stored; bad ones are skipped, counted in result->rejected
 * and described through reject (may be NULL). *result (may be NULL) receives what was stored.
 * Returns PCACHE_OK (rejected records included: check result->rejected); PCACHE_ERR_CORRUPT (not
 * a bundle, or it ends early: what came before is stored); PCACHE_ERR_IO; PCACHE_ERR_INVALID_ARG
 * (path is a file the cache owns, as for pcache_admin_export); any status of pcache_put().
 * Thread safety: safe concurrently with any operation on the handle.
 */
PCACHE_API pcache_status pcache_admin_import(pcache *cache, const char *path,
                                             pcache_progress_fn progress, pcache_reject_fn reject,
                                             void *context, pcache_transfer *result);

/**
 * Parses a size as PCACHE_MAX_SIZE and ?max_size= do: a number of bytes with an optional
 * K/M/G/T suffix (binary: 1K = 1024; KiB, KB spellings too), e.g. "500M", "4G", "1048576".
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL arguments, not a size, or overflow; the
 * message says why).
 */
PCACHE_API pcache_status pcache_admin_parse_size(const char *text, uint64_t *bytes);

/**
 * Parses a duration: a number with a unit s, m, h or d ("30d", "12h", "15m", "45s").
 * Returns PCACHE_OK; PCACHE_ERR_INVALID_ARG (NULL arguments, not a duration, or overflow).
 */
PCACHE_API pcache_status pcache_admin_parse_duration(const char *text, uint64_t *seconds);

#ifdef __cplusplus
}
#endif

#endif /* PROGCACHE_PROGCACHE_ADMIN_H */
