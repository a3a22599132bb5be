// What the drop-ins (nvrtc_dropin/, nvjitlink_dropin/, nvvm_dropin/) share: the cache they go
// through, the ELF note that marks each of them, their own file, a getter pair's answers as a
// hit replays them, and the memo of calls a real library accepted. Each drop-in links its own
// copy of the core: these are per drop-in, not per process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "core/key.hpp"
#include "cuda/elf_file.hpp"
#include "cuda/jit_library.hpp"
#include "util/byte_io.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"

namespace progcache {
class Cache;
}

namespace progcache::dropin {

// The ELF note that marks a file as a drop-in (cuda/elf_file.hpp): every copy of the core that
// looks for a real library (libprogcache in a process started by `progcache run`, say) skips it.
struct DropinNote {
  uint32_t name_size = 10, desc_size = 4, type = kFrontEndNoteType;
  char name[12] = "progcache";
  uint32_t desc = 1;
};
#define PCACHE_DROPIN_NOTE()                                    \
  __attribute__((used, section(".note.progcache"), aligned(4))) \
  const ::progcache::dropin::DropinNote kDropinNote {}

// Runs f for an exported function: an exception becomes `no_memory` when memory ran out, else
// `internal` with the reason on stderr (no real library to forward to, for one). No C++ exception
// leaves a drop-in.
template <class R, class F>
R guarded_call(const char *library, const char *function, R no_memory, R internal, F &&f) noexcept {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    return no_memory;
  } catch (const Error &e) {
    if (e.status() == Status::no_memory) return no_memory;
    std::fprintf(stderr, "progcache drop-in %s: %s: %s\n", library, function, e.what());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "progcache drop-in %s: %s: %s\n", library, function, e.what());
  } catch (...) {
  }
  return internal;
}

// The cache the drop-in's compiles go through: the one pcache_open(NULL, NULL) opens
// ($PCACHE_URI, the config files, the default cache), opened on first use and closed at exit.
// Null when it cannot be opened (reported once on stderr, naming `library`, "NVRTC" say): the
// drop-in then compiles without one. The first call's library names it for the process.
Cache *dropin_cache(const char *library);

// The file the code at address was loaded from ("" if unknown): the drop-in's own, which its
// search for the real library must never return.
std::string own_path(const void *address);

// One output getter pair's answers after a real compile or link (nvrtcGetPTXSize/nvrtcGetPTX,
// nvJitLinkGetErrorLogSize/nvJitLinkGetErrorLog, ...), as a hit replays them: the same statuses,
// the same size, the same bytes.
struct OutputSlot {
  int32_t size_result = 0;  // what the size getter returned
  int32_t data_result = 0;  // what the data getter returned (size_result when the size call failed)
  // Whether the size getter wrote the size: after a failed compile NVRTC answers success and
  // leaves the caller's variable as it was.
  bool size_written = true;
  std::string bytes;  // the data getter's bytes (as many as the size getter reported)
};
void write_slot(ByteWriter &w, const OutputSlot &slot);
void read_slot(ByteReader &r, OutputSlot *slot);  // a bad slot fails r
// A run's getter answers as an entry's payload: magic, then each slot. decode_slots fills slots
// only from a whole payload this version wrote (false: the caller runs the library instead).
std::string encode_slots(std::string_view magic, const OutputSlot *slots, size_t count);
bool decode_slots(std::string_view payload, std::string_view magic, OutputSlot *slots,
                  size_t count);

// Calls the real getter pair on program, as a caller would (the size, then the bytes into a
// buffer of that size; an empty output's getter is called too).
template <class R, class P, class Buffer>
OutputSlot collect_slot(R (*size_fn)(P, size_t *), R (*data_fn)(P, Buffer *), P program) {
  constexpr size_t kUnwritten = ~size_t(0);
  OutputSlot slot;
  size_t size = kUnwritten;
  slot.size_result = int32_t(size_fn(program, &size));
  slot.data_result = slot.size_result;
  if (slot.size_result != 0) return slot;
  slot.size_written = size != kUnwritten;
  if (!slot.size_written) size = 0;
  slot.bytes.assign(size, '\0');
  char spare[16];
  slot.data_result = int32_t(data_fn(program, size ? slot.bytes.data() : spare));
  if (slot.data_result != 0) slot.bytes.clear();
  return slot;
}

// A running digest of the calls made so far on one program of a real library (its build, the
// creating call, each call that changed it, in order), and memos of those the real library
// accepted. Where the memo says the same build accepted the same calls in the same order, a
// drop-in answers success without loading the library; a refusal is never remembered (its
// error log is the real program's to give).
class AcceptedCalls {
 public:
  // build: the real library's exact build (library_build); call: the creating call's arguments.
  AcceptedCalls(std::string_view build, std::string_view call);
  void add(std::string_view call);
  // Whether the calls so far were accepted, and what the drop-in kept of the real program's
  // answers then (a log it asks for, say; "" for none). nullopt: not known.
  std::optional<std::string> known(Cache *cache) const;
  void remember(Cache *cache, std::string_view answers = {}) const;

 private:
  std::string chain_;  // the digest of the calls so far
};

// The live objects a drop-in handed out as handles: a handle it did not make, or destroyed, is
// never dereferenced.
template <class T>
class Registry {
 public:
  void add(T *p) {
    std::lock_guard lock(mutex_);
    live_.insert(p);
  }
  bool remove(T *p) {
    std::lock_guard lock(mutex_);
    return live_.erase(p) != 0;
  }
  T *find(const void *handle) {
    auto *p = static_cast<T *>(const_cast<void *>(handle));
    std::lock_guard lock(mutex_);
    return live_.count(p) ? p : nullptr;
  }

 private:
  ForkSafeMutex mutex_;
  std::unordered_set<const T *> live_;
};

// The answer a drop-in last derived for a key (the real library's build or identity), kept for
// the process: asked again under the same key, it is answered without the cache's memo (a read
// transaction) or the real library. Thread-safe.
template <class T>
class KeptAnswer {
 public:
  bool find(const std::string &key, T *out) {
    std::lock_guard lock(mutex_);
    if (!has_ || key != key_) return false;
    *out = value_;
    return true;
  }
  void keep(const std::string &key, const T &value) {
    std::lock_guard lock(mutex_);
    has_ = true;
    key_ = key;
    value_ = value;
  }

 private:
  ForkSafeMutex mutex_;
  bool has_ = false;
  std::string key_;
  T value_{};
};

// An input a drop-in keeps (a module, a link input): its bytes, shared, and their digest, which is
// what keys it. The same bytes given again (numba-cuda adds the same libdevice to every program)
// cost a comparison with the copy kept from last time, not a copy and a hash: the last few large
// inputs are remembered (process-wide, thread-safe).
struct InputBytes {
  std::shared_ptr<const std::string> bytes;
  ContentDigest digest{};
};
InputBytes intern_input(const void *data, size_t size);

// A call's arguments as AcceptedCalls takes them: each part with its length (no two lists of
// parts write the same text).
class CallText {
 public:
  CallText &add(std::string_view part);
  CallText &add(uint64_t number);
  const std::string &text() const { return text_; }

 private:
  std::string text_;
};

// The real library behind a drop-in: found as the core finds it (cuda/jit_library.hpp), never the
// drop-in's own file and only its major (restrict_library_search, from the drop-in's constructor).
// Its exact build ("libNVVM <build-id>"), read from the file without loading the library.
std::string real_build(const LibrarySpec &spec, const char *library);
// The real library opened (once; a failure is tried again on the next call), and the function
// name in it, or null where it lacks it. Throws Error(cuda_unavailable) when it cannot be opened.
void *real_function(const LibrarySpec &spec, const char *library, const char *name);
// The same for a forwarded export (dropin_common/forward.hpp), which has no way to return an
// error: without the real library or the function, it says so on stderr and aborts.
void *real_function_or_abort(const LibrarySpec &spec, const char *library,
                             const char *name) noexcept;

}  // namespace progcache::dropin
