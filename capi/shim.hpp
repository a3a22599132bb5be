// What the C entry points share: the handle types behind the opaque pointers and the one way a
// call runs (guarded: every exception becomes a status and a thread-local message). The shim only
// validates, converts and calls the core; the behaviour lives in src/core.
#pragma once

#define PCACHE_BUILDING_LIBRARY 1
#define PCACHE_ADMIN_UNSTABLE 1
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "core/cache.hpp"
#include "core/compile.hpp"
#include "progcache/progcache.h"
#include "progcache/progcache_admin.h"
#include "util/error.hpp"
#include "util/warning.hpp"

// Handles live in slots that are never freed: a closed slot goes to a free list for the next
// pcache_open. So a call on a closed handle reads valid memory, sees the slot closed and answers
// PCACHE_ERR_INVALID_ARG, instead of touching freed memory (one atomic load, no lock).
// A slot either owns its cache (pcache_open) or borrows a tier of its owner's (pcache_admin_tier).
struct pcache {
  std::atomic<uint32_t> state{0};  // kSlotOpen or kSlotClosed
  std::unique_ptr<progcache::Cache> cache;
  progcache::Cache *tier = nullptr;  // a tier handle's cache, owned by the owner's
  pcache *next_free = nullptr;
  // Filled on first use, released with the slot.
  std::mutex lazy_mutex;
  std::vector<pcache *> tier_handles;  // by tier index; null until asked for
  std::string display_uri, scheme, max_size_source;
};

struct pcache_compiled {
  std::shared_ptr<progcache::CompileResult> result;
};

namespace progcache::shim {

inline constexpr uint32_t kSlotOpen = 0x0b5e55ed, kSlotClosed = 0xdeadc105;
// First (smallest) published sizes of the growable structs (docs/ABI.md).
inline constexpr uint32_t kLinkJobV1Size = 40, kLinkInputV1Size = 32;
inline constexpr uint32_t kOptionsV1Size = 16, kStatsV1Size = 72, kProgramV1Size = 112,
                          kSharedStatsV1Size = 72;

// A fresh slot (from the free list when one is there), and back to the free list (with the tier
// handles it lent, which close with it).
pcache *take_slot();
void return_slot(pcache *p);

// Records a failure as the calling thread's last outcome (message, status, cause); returns status.
pcache_status fail(pcache_status status, const std::string &message,
                   const progcache::ErrorDetail &detail = {}) noexcept;

// Runs fn, turning every exception into a status and a message. Nothing escapes. A warning the
// call raised without failing (a damaged entry removed) becomes pcache_last_error().
template <typename Fn>
pcache_status guarded(const char *function, Fn &&fn) noexcept {
  progcache::ThreadMessages &messages = progcache::thread_messages();
  try {
    // Cleared only when set: clear() stores a NUL through each string's pointer, which cost a
    // memory hit two dependent loads and stores on every call.
    if (!messages.last_error.empty()) messages.last_error.clear();
    // A warning left by a call that failed is not this call's.
    if (!messages.warning.empty()) messages.warning.clear();
    messages.last_detail = {};
    const pcache_status status = fn();
    messages.last_status = status;
    if (!messages.warning.empty()) messages.last_error.swap(messages.warning);
    return status;
  } catch (const Error &e) {
    return fail(static_cast<pcache_status>(e.status()), std::string(function) + ": " + e.what(),
                e.detail());
  } catch (const std::bad_alloc &) {
    return fail(PCACHE_ERR_NO_MEMORY, std::string(function) + ": out of memory");
  } catch (const std::exception &e) {
    return fail(PCACHE_ERR_INTERNAL, std::string(function) + ": internal error: " + e.what());
  } catch (...) {
    return fail(PCACHE_ERR_INTERNAL, std::string(function) + ": unknown internal error");
  }
}

Error invalid(const std::string &what);

// Fills the first struct_size bytes of a growable struct with zeros and sets struct_size.
template <typename T>
void init_struct(T *s, uint32_t struct_size, uint32_t v1_size, const char *what) {
  if (!s) throw invalid(std::string(what) + " is NULL");
  if (struct_size < v1_size)
    throw invalid("struct_size " + std::to_string(struct_size) + " is smaller than any " + what +
                  " (" + std::to_string(v1_size) + ")");
  std::memset(static_cast<void *>(s), 0, struct_size);  // a newer caller's tail is zeroed
  s->struct_size = struct_size;
}

// An output struct the caller sized: not NULL, and at least its first published size.
template <typename T>
void need_output_struct(const T *s, uint32_t v1_size, const char *type) {
  if (!s) throw invalid(std::string(type) + " is NULL");
  if (s->struct_size < v1_size)
    throw invalid(std::string(type) + "->struct_size " + std::to_string(s->struct_size) +
                  " is too small (set it to sizeof(" + type + "))");
}

// Writes out into the first dst->struct_size bytes of *dst (a newer caller's tail is left, an
// older caller's smaller struct gets what it has room for).
template <typename T>
void copy_known_prefix(T *dst, T out) {
  out.struct_size = dst->struct_size;
  std::memcpy(static_cast<void *>(dst), &out, std::min<size_t>(dst->struct_size, sizeof out));
}

// need_cache's failure: invalid_arg for a NULL, closed or invalid handle.
[[noreturn]] void refuse_cache(pcache *cache);
// The open cache behind a handle; throws invalid_arg for NULL, closed or invalid handles. Inline,
// like need_key: both are on every hit's path, and their checks are a few instructions.
inline progcache::Cache &need_cache(pcache *cache) {
  if (cache && cache->state.load(std::memory_order_acquire) == kSlotOpen) {
    if (cache->cache) return *cache->cache;
    if (cache->tier) return *cache->tier;
  }
  refuse_cache(cache);
}
inline ByteView need_key(const void *key, size_t key_size) {
  if (!key) throw invalid("key is NULL");
  return {key, key_size};
}
// need_cache for the shared counters: a tiered handle has none of its own (unsupported).
progcache::Cache &need_counters(pcache *cache);
// Reads a pcache_program into the core's description (pointers stay the caller's).
progcache::ProgramDesc to_desc(const pcache_program *program);
// The same into *INTO, every field set again, its vectors' storage reused (a hot caller keeps
// one description per thread instead of allocating one per call).
void read_program(const pcache_program *program, progcache::ProgramDesc *into);
// Reads a pcache_link_job into a link program (code_type link; pointers stay the caller's).
// Unnamed inputs keep an empty name here; the link names them "input<i>".
progcache::ProgramDesc link_desc(const pcache_link_job *job);
// C string arrays as views; throws invalid_arg naming `what` for NULL pointers.
std::vector<std::string_view> string_list(const char *const *list, size_t n, const char *what);
// The same into *INTO (cleared first, its storage reused).
void read_string_list(const char *const *list, size_t n, const char *what,
                      std::vector<std::string_view> *into);

// The last program pcache_make_key keyed on a thread, all but its source: its fields copied, a
// description whose views are into those copies, and the bytes that begin its digest
// (core/key.hpp: program_prefix). A caller that keys many sources with one name, target and set
// of options (a module's kernels, a build's translation units) has them found by comparing what
// it passes with the copies, without reading the struct, parsing the options or encoding the
// fields again. Kept only for programs of this header's struct_size with no in-memory headers
// and no extra digest, whose name, options and name expressions come to at most 16 KiB (the
// others always take the full path). Not thread-safe: one per thread.
class LastKeyedProgram {
 public:
  // The kept description with its source set to program's when every other field of program
  // equals the kept one's (compared by value: a caller may reuse its strings' storage);
  // nullptr otherwise, and for a NULL source (the full path reports it).
  progcache::ProgramDesc *match(const pcache_program &program);
  // Keeps program's fields. desc: what read_program made of them; prefix: program_prefix(desc).
  void keep(const pcache_program &program, const progcache::ProgramDesc &desc,
            std::string_view prefix);
  std::string_view prefix() const { return prefix_; }

 private:
  static constexpr size_t kMaxKeptBytes = 16 * 1024;
  static bool keepable(const pcache_program &program);
  bool kept_ = false;
  bool has_name_ = false;
  int32_t code_type_ = 0, target_ = 0;
  uint32_t nvrtc_version_ = 0;
  std::string name_, prefix_;
  std::vector<std::string> options_, name_expressions_;
  progcache::ProgramDesc desc_;
};

}  // namespace progcache::shim
