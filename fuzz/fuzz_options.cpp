// Option canonicalisation: NUL-separated option lists. Only Error(invalid_arg) may come out,
// and canonicalising a canonical list changes nothing (one spelling per meaning).
#include <string>
#include <vector>

#include "core/key.hpp"
#include "util/error.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const bool digest = data[0] & 1;
  std::vector<std::string> storage;
  std::string cur;
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0) {
      storage.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(char(data[i]));
    }
  }
  storage.push_back(cur);
  std::vector<std::string_view> opts(storage.begin(), storage.end());
  try {
    const std::vector<std::string> canon = canonical_options(opts);
    std::vector<std::string_view> again(canon.begin(), canon.end());
    if (canonical_options(again) != canon) __builtin_trap();
    ProgramDesc p;
    p.source = std::string_view("x");
    p.options = opts;
    if (digest) p.extra_digest = std::string_view("d");
    (void)derive_key(p);
    (void)program_digest(p);  // pcache_make_key's (schema 5): the same fields, refused alike
  } catch (const Error &e) {
    if (e.status() != Status::invalid_arg) __builtin_trap();
  }
  return 0;
}
