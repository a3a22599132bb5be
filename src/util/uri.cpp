#include "util/uri.hpp"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "util/error.hpp"
#include "util/paths.hpp"
#include "util/settings.hpp"
#include "util/trust.hpp"

namespace progcache {

namespace {
constexpr const char *kSchemes =
    "memory:, sqlite:PATH, filestream:DIR, redis://HOST:PORT[/DB], tiered:URI|URI...";

std::string env(const char *name) {
  const char *v = trusted_env(name);
  return v ? v : "";
}
}  // namespace

std::string Uri::take(const std::string &name, const std::string &fallback) {
  auto it = params.find(name);
  if (it == params.end()) return fallback;
  std::string v = it->second;
  params.erase(it);
  return v;
}

void Uri::expect_no_params() const {
  if (!params.empty())
    throw Error(Status::invalid_arg,
                "unknown parameter '" + params.begin()->first + "' for " + scheme + ": URI");
}

std::string absolute_uri(std::string_view text) {
  const Uri uri = parse_uri(text);  // refuses what is not a URI
  const size_t colon = text.find(':');
  const std::string_view rest = text.substr(colon + 1);
  if (uri.scheme == "tiered") {
    std::string out = "tiered:";
    for (size_t start = 0;;) {
      const size_t bar = rest.find('|', start);
      out += absolute_uri(rest.substr(start, bar - start));
      if (bar == std::string_view::npos) break;
      out += '|';
      start = bar + 1;
    }
    return out;
  }
  if (uri.scheme != "sqlite" && uri.scheme != "filestream") return std::string(text);
  const std::string_view query = rest.substr(std::min(rest.find('?'), rest.size()));
  if (uri.path[0] == '/') return uri.scheme + ":" + uri.path + std::string(query);
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) throw_errno("cannot tell the working directory");
  return uri.scheme + ":" + join_path(cwd, uri.path) + std::string(query);
}

Uri parse_uri(std::string_view text) {
  Uri uri;
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos || colon == 0)
    throw Error(Status::invalid_arg,
                "cache URI '" + std::string(text) + "' has no scheme; use one of " + kSchemes);
  uri.scheme = std::string(text.substr(0, colon));
  std::string_view rest = text.substr(colon + 1);
  if (uri.scheme == "tiered") {
    // The tiers' own URIs carry their parameters: the text after "tiered:" is split on '|' by
    // Cache::open, never on '?'.
    uri.path = std::string(rest);
    if (uri.path.empty())
      throw Error(Status::invalid_arg,
                  "tiered: needs tiers, e.g. tiered:memory:|sqlite:/var/cache/app.db|"
                  "redis://cache:6379");
    return uri;
  }
  const size_t q = rest.find('?');
  uri.path = std::string(rest.substr(0, q));
  if (q != std::string_view::npos) {
    std::string_view query = rest.substr(q + 1);
    while (!query.empty()) {
      const size_t amp = query.find('&');
      std::string_view item = query.substr(0, amp);
      const size_t eq = item.find('=');
      if (item.empty() || eq == 0 || eq == std::string_view::npos)
        throw Error(Status::invalid_arg,
                    "malformed parameter '" + std::string(item) + "' in URI (want name=value)");
      uri.params[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
      if (amp == std::string_view::npos) break;
      query = query.substr(amp + 1);
    }
  }
  for (char c : uri.path)
    if (c == '\0' || c == '\n' || c == '\r')
      throw Error(Status::invalid_arg, "cache URI contains a control character");
  if (uri.scheme == "memory") {
    if (!uri.path.empty())
      throw Error(Status::invalid_arg, "unexpected text '" + uri.path + "' after memory:");
  } else if (uri.scheme == "sqlite" || uri.scheme == "filestream") {
    if (uri.path.empty())
      throw Error(Status::invalid_arg,
                  uri.scheme + ": needs a path, e.g. " + uri.scheme +
                      (uri.scheme == "sqlite" ? ":/tmp/cache.db" : ":/tmp/cache"));
    uri.path = expand_home(uri.path, "cache path '" + uri.path + "'");
  } else if (uri.scheme == "redis") {
    if (uri.path.size() < 3 || uri.path.compare(0, 2, "//") != 0)
      throw Error(Status::invalid_arg, "redis: URI needs a server, e.g. redis://127.0.0.1:6379/0");
  } else if (uri.scheme == "rediss") {
    throw Error(Status::unsupported,
                "rediss:// (Redis over TLS) is not supported: the hiredis in Debian 12 (0.14) has "
                "no TLS; reach the server through a TLS tunnel (stunnel, spiped) with redis://, "
                "see docs/distributed.md");
  } else {
    throw Error(Status::invalid_arg,
                "unknown cache scheme '" + uri.scheme + ":'; known schemes: " + kSchemes);
  }
  return uri;
}

std::string redact_uri(std::string text) {
  for (size_t pos = text.find("://"); pos != std::string::npos; pos = text.find("://", pos + 3)) {
    const size_t start = pos + 3;
    // The userinfo ends at the last '@' before the query or the next tier, as the Redis URI
    // parser reads it: a password may hold a raw '/'.
    const size_t end = std::min(text.find_first_of("?|", start), text.size());
    const size_t at = text.rfind('@', end);
    if (at == std::string::npos || at < start) continue;
    const size_t colon = text.find(':', start);
    const size_t from = colon != std::string::npos && colon < at ? colon + 1 : start;
    text.replace(from, at - from, "***");
  }
  return text;
}

namespace {

// The default cache's own location ($PCACHE_DIR, else the user's cache directory), "" if none.
std::string default_location() {
  if (std::string d = env("PCACHE_DIR"); !d.empty()) return "sqlite:" + d + "/cache.db";
  if (std::string dir = user_cache_dir(); !dir.empty()) return "sqlite:" + dir + "/cache.db";
  return "";
}

}  // namespace

std::string user_cache_dir() {
  if (std::string x = env("XDG_CACHE_HOME"); !x.empty() && x[0] == '/') return x + "/progcache";
  if (std::string h = home_dir(); !h.empty()) return h + "/.cache/progcache";
  return "";
}

std::string default_uri() {
  if (std::string u = env("PCACHE_URI"); !u.empty()) return u;
  if (env("PCACHE_DIR").empty())
    if (const Setting file = lookup_setting("cache_uri"); !file.value.empty()) return file.value;
  if (std::string location = default_location(); !location.empty()) return location;
  throw Error(Status::invalid_arg,
              "no default cache location: set PCACHE_DIR, XDG_CACHE_HOME or HOME, or pass a URI");
}

bool is_default_location(const Uri &uri) {
  const std::string location = default_location();
  if (location.empty()) return false;
  const Uri def = parse_uri(location);
  return uri.scheme == def.scheme && uri.path == def.path;
}

uint64_t parse_uint_param(const std::string &name, const std::string &value) {
  if (value.empty() || value.size() > 19 ||
      value.find_first_not_of("0123456789") != std::string::npos)
    throw Error(Status::invalid_arg, "parameter " + name + "='" + value + "' is not a number");
  const uint64_t n = std::stoull(value);
  // Every numeric parameter is a count, a level or a duration that must fit an int.
  if (n > uint64_t(INT32_MAX))
    throw Error(Status::invalid_arg, "parameter " + name + "='" + value + "' is too large");
  return n;
}

}  // namespace progcache

namespace progcache {

uint64_t parse_size(const std::string &what, const std::string &text) {
  std::string_view t = text;
  // An optional "B" or "iB" after a unit ("4GiB", "500MB"); a bare "B" after digits is bytes.
  if (t.size() > 2 && t.substr(t.size() - 2) == "iB")
    t.remove_suffix(2);
  else if (t.size() > 1 && t.back() == 'B')
    t.remove_suffix(1);
  uint64_t mult = 1;
  if (!t.empty()) {
    switch (std::toupper(static_cast<unsigned char>(t.back()))) {
      case 'K':
        mult = 1ull << 10;
        break;
      case 'M':
        mult = 1ull << 20;
        break;
      case 'G':
        mult = 1ull << 30;
        break;
      case 'T':
        mult = 1ull << 40;
        break;
      default:
        break;
    }
    if (mult != 1) t.remove_suffix(1);
  }
  if (t.empty() || t.find_first_not_of("0123456789") != std::string_view::npos)
    throw Error(Status::invalid_arg,
                what + " '" + text + "' is not a size (e.g. 500M, 4G, 1048576)");
  const size_t digits = t.find_first_not_of('0');
  // Up to kMaxSize: a count of bytes that any store holds, with room to add to it.
  if (digits != std::string_view::npos &&
      (t.size() - digits > 19 || std::stoull(std::string(t.substr(digits))) > kMaxSize / mult))
    throw Error(Status::invalid_arg, what + " '" + text + "' is larger than 1 EiB");
  return digits == std::string_view::npos ? 0 : std::stoull(std::string(t.substr(digits))) * mult;
}

int64_t parse_duration_seconds(const std::string &what, const std::string &text) {
  std::string t = text;
  int64_t mult = 1;
  if (!t.empty() && !std::isdigit(static_cast<unsigned char>(t.back()))) {
    switch (t.back()) {
      case 's':
        mult = 1;
        break;
      case 'm':
        mult = 60;
        break;
      case 'h':
        mult = 3600;
        break;
      case 'd':
        mult = 86400;
        break;
      case 'w':
        mult = 7 * 86400;
        break;
      default:
        throw Error(Status::invalid_arg,
                    what + " '" + text + "' is not a duration (e.g. 30d, 12h)");
    }
    t.pop_back();
  }
  if (t.empty() || t.size() > 12 || t.find_first_not_of("0123456789") != std::string::npos)
    throw Error(Status::invalid_arg, what + " '" + text + "' is not a duration (e.g. 30d, 12h)");
  return int64_t(std::stoll(t)) * mult;
}

uint64_t default_max_size() {
  const char *v = trusted_env("PCACHE_MAX_SIZE");
  if (!v || !*v) return 0;
  return parse_size("PCACHE_MAX_SIZE", v);
}

}  // namespace progcache
