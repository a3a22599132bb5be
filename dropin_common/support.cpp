#include "support.hpp"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/cache.hpp"
#include "core/key.hpp"
#include "util/hex.hpp"

namespace progcache::dropin {

Cache *dropin_cache(const char *library) {
  static std::once_flag once;
  static std::unique_ptr<Cache> cache;  // closed at exit: the shared counters are flushed then
  std::call_once(once, [library] {
    try {
      CacheOptions options;
      options.max_size_bytes = CacheOptions::kConfiguredCap;
      cache = Cache::open("", options);
    } catch (const std::exception &e) {
      std::fprintf(stderr, "progcache drop-in %s: no cache (%s); compiling without one\n", library,
                   e.what());
    }
  });
  return cache.get();
}

std::string own_path(const void *address) {
  Dl_info info{};
  if (::dladdr(address, &info) && info.dli_fname) return info.dli_fname;
  return "";
}

namespace {
constexpr uint32_t kSizeWritten = 1;
}  // namespace

void write_slot(ByteWriter &w, const OutputSlot &slot) {
  w.u32(uint32_t(slot.size_result));
  w.u32(uint32_t(slot.data_result));
  w.u32(slot.size_written ? kSizeWritten : 0);
  w.u64(slot.bytes.size());
  w.bytes(slot.bytes);
}

void read_slot(ByteReader &r, OutputSlot *slot) {
  slot->size_result = int32_t(r.u32());
  slot->data_result = int32_t(r.u32());
  const uint32_t flags = r.u32();
  if (flags & ~kSizeWritten) r.fail();
  slot->size_written = flags & kSizeWritten;
  const uint64_t size = r.u64();
  slot->bytes = std::string(r.bytes(size > SIZE_MAX ? SIZE_MAX : size_t(size)));
}

std::string encode_slots(std::string_view magic, const OutputSlot *slots, size_t count) {
  ByteWriter w;
  w.bytes(magic);
  for (size_t i = 0; i < count; ++i) write_slot(w, slots[i]);
  return w.take();
}

bool decode_slots(std::string_view payload, std::string_view magic, OutputSlot *slots,
                  size_t count) {
  ByteReader r(payload);
  if (r.bytes(magic.size()) != magic) return false;
  std::vector<OutputSlot> decoded(count);
  for (OutputSlot &slot : decoded) read_slot(r, &slot);
  if (!r.done()) return false;
  for (size_t i = 0; i < count; ++i) slots[i] = std::move(decoded[i]);
  return true;
}

namespace {
std::string chained(std::string_view chain, std::string_view call) {
  const std::string text = CallText().add(chain).add(call).text();
  const ContentDigest d = content_digest(ByteView(text));
  return std::string(d.begin(), d.end());
}
}  // namespace

AcceptedCalls::AcceptedCalls(std::string_view build, std::string_view call)
    : chain_(chained(build, call)) {}

void AcceptedCalls::add(std::string_view call) {
  chain_ = chained(chain_, call);
}

std::optional<std::string> AcceptedCalls::known(Cache *cache) const {
  if (!cache) return std::nullopt;
  auto memo = cache->load_memo("accepted/" + to_hex(ByteView(chain_)));
  if (!memo || memo->empty() || (*memo)[0] != '1') return std::nullopt;
  return memo->substr(1);
}

void AcceptedCalls::remember(Cache *cache, std::string_view answers) const {
  if (cache) cache->save_memo("accepted/" + to_hex(ByteView(chain_)), "1" + std::string(answers));
}

InputBytes intern_input(const void *data, size_t size) {
  // Inputs this large are worth remembering; this many of them (libdevice is 464 KB).
  constexpr size_t kLarge = 64 << 10, kKept = 4;
  static ForkSafeMutex mutex;
  static std::deque<InputBytes> kept;
  const bool large = size >= kLarge;
  if (large) {
    std::lock_guard lock(mutex);
    for (const InputBytes &k : kept)
      if (k.bytes->size() == size && std::memcmp(k.bytes->data(), data, size) == 0) return k;
  }
  InputBytes in;
  in.bytes = std::make_shared<const std::string>(static_cast<const char *>(data), size);
  in.digest = content_digest(ByteView(*in.bytes));
  if (large) {
    std::lock_guard lock(mutex);
    kept.push_front(in);
    if (kept.size() > kKept) kept.pop_back();
  }
  return in;
}

CallText &CallText::add(std::string_view part) {
  add(uint64_t(part.size()));
  text_.append(part);
  return *this;
}

CallText &CallText::add(uint64_t number) {
  for (int i = 0; i < 8; ++i) text_.push_back(char(number >> (8 * i)));
  return *this;
}

namespace {
LibraryLocation real_location(const LibrarySpec &spec, const char *library) {
  return locate_library(spec, dropin_cache(library));
}
}  // namespace

std::string real_build(const LibrarySpec &spec, const char *library) {
  return current_library_build(spec, dropin_cache(library));
}

void *real_function(const LibrarySpec &spec, const char *library, const char *name) {
  // Held while the library is located (the cache's memos) and opened: taken before the
  // cache's own locks, at fork() too.
  static ForkSafeMutex mutex(ForkSafeMutex::kOuter);
  static void *handle = nullptr;  // one real library per drop-in
  std::lock_guard lock(mutex);
  if (!handle) handle = open_library(spec, real_location(spec, library));
  return ::dlsym(handle, name);
}

void *real_function_or_abort(const LibrarySpec &spec, const char *library,
                             const char *name) noexcept {
  std::string why;
  try {
    if (void *f = real_function(spec, library, name)) return f;
    why = "the real library has no such function";
  } catch (const std::exception &e) {
    why = e.what();
  }
  std::fprintf(stderr, "progcache drop-in %s: %s: %s\n", library, name, why.c_str());
  std::abort();
}

}  // namespace progcache::dropin
