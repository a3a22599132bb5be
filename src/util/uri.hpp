// Cache URIs: "scheme:rest?name=value&name=value".
#pragma once

#include <map>
#include <string>
#include <string_view>

namespace progcache {

struct Uri {
  std::string scheme;  // "memory", "sqlite", "filestream", "redis", "tiered"
  std::string path;    // what follows "scheme:" up to '?' (for tiered: all of it)
  std::map<std::string, std::string> params;

  // Returns the parameter and erases it (so that leftovers can be reported as unknown).
  std::string take(const std::string &name, const std::string &fallback = "");
  // Throws Error(invalid_arg) naming any parameter nobody took.
  void expect_no_params() const;
};

// text with the password of every "scheme://user:password@host" replaced by "***".
std::string redact_uri(std::string text);

// Throws Error(invalid_arg) on syntax errors or an unknown scheme.
Uri parse_uri(std::string_view text);

// text with every file path in it (sqlite:, filestream:, each tier of tiered:) made absolute
// from the working directory, for a URI handed to another process that may chdir. Throws as
// parse_uri.
std::string absolute_uri(std::string_view text);

// The user's own progcache directory: $XDG_CACHE_HOME/progcache (an absolute $XDG_CACHE_HOME),
// else $HOME/.cache/progcache; "" when neither is set. The default cache lives there unless
// $PCACHE_DIR says otherwise, and so do per-user memos (util/openssl_config_memo.hpp).
std::string user_cache_dir();

// The URI used for NULL/"": $PCACHE_URI, else sqlite:$PCACHE_DIR/cache.db, else cache_uri in
// the config files, else sqlite:$XDG_CACHE_HOME/progcache/cache.db, else
// sqlite:$HOME/.cache/progcache/cache.db.
std::string default_uri();
// Whether uri names the default cache's own location ($PCACHE_DIR/cache.db, else
// ~/.cache/progcache/cache.db): the cache that gets the default cap, however it is named.
bool is_default_location(const Uri &uri);

// The largest size parse_size accepts: 1 EiB.
inline constexpr uint64_t kMaxSize = uint64_t(1) << 60;
// "4G", "500M", "64K", "1T", "123" (binary units; a trailing "B"/"iB" is accepted), at most
// kMaxSize. Throws Error(invalid_arg) naming what.
uint64_t parse_size(const std::string &what, const std::string &text);
// "30d", "12h", "15m", "45s" (a bare number is seconds). Throws Error(invalid_arg).
int64_t parse_duration_seconds(const std::string &what, const std::string &text);
// $PCACHE_MAX_SIZE if set (parse_size), else 0. Cache::configured_cap() is the whole rule.
uint64_t default_max_size();

// Parses a non-negative integer parameter; throws Error(invalid_arg) naming it.
uint64_t parse_uint_param(const std::string &name, const std::string &value);

}  // namespace progcache
