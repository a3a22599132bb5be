// Bundle import (progcache import): any bytes. Never crashes; only corrupt or unsupported
// errors come out; every entry it stores reads back, and it stores no more than it counts.
#include <cstdio>
#include <string>

#include "core/bundle.hpp"
#include "util/error.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // A bundle without records is 32 bytes; leave fmemopen a non-empty buffer.
  if (size == 0) return 0;
  FILE *in = ::fmemopen(const_cast<uint8_t *>(data), size, "rb");
  if (!in) return 0;
  auto cache = Cache::open("memory:", CacheOptions{});
  BundleProgress p;
  try {
    p = import_bundle_stream(*cache, in, "fuzz", nullptr, nullptr);
  } catch (const Error &e) {
    if (e.status() != Status::corrupt && e.status() != Status::unsupported) __builtin_trap();
  }
  std::fclose(in);
  uint64_t listed = 0;
  cache->list([&](const EntryInfo &e) {
    ++listed;
    if (!cache->get(e.key, Access::peek)) __builtin_trap();
  });
  if (listed > cache->stats().puts) __builtin_trap();
  return 0;
}
