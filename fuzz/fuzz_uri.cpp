// URI, size and duration parsing: any text. Only Error(invalid_arg) may come out (and
// Error(unsupported) for a URI naming a known but unsupported scheme, rediss://).
#include <string>

#include "util/error.hpp"
#include "util/uri.hpp"

using namespace progcache;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string text(reinterpret_cast<const char *>(data), size);
  auto only_invalid = [](auto &&fn) {
    try {
      fn();
    } catch (const Error &e) {
      if (e.status() != Status::invalid_arg && e.status() != Status::unsupported) __builtin_trap();
    }
  };
  only_invalid([&] {
    Uri uri = parse_uri(text);
    uri.take("busy_timeout_ms");
    uri.expect_no_params();
  });
  if (redact_uri(text).find(":***@") == std::string::npos && text.find("@") == std::string::npos &&
      redact_uri(text) != text)
    __builtin_trap();  // nothing to redact must leave the text unchanged
  only_invalid([&] { parse_size("size", text); });
  only_invalid([&] { parse_duration_seconds("age", text); });
  only_invalid([&] { parse_uint_param("n", text); });
  return 0;
}
