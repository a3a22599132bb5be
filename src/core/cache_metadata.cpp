// The metadata a cache keeps beside its entries: memos (in the entry format, checksummed and
// signed) and the cap a person stored with `progcache config`, and where a handle's cap comes
// from when its caller leaves it to the configuration.
#include <string>
#include <string_view>

#include "core/cache.hpp"
#include "format/entry.hpp"
#include "util/error.hpp"
#include "util/settings.hpp"
#include "util/uri.hpp"
#include "util/warning.hpp"

namespace progcache {
namespace {

constexpr std::string_view kCapMemo = "config/max_size";
static_assert(Backend::is_lasting_meta(kCapMemo), "a trim or a reset must never drop the cap");

}  // namespace

Cache::ConfiguredCap Cache::configured_cap() {
  // A URI's cap, then the environment, then the cache's own, then the config files, then the
  // default cache's default.
  if (uri_cap_) return {*uri_cap_, "URI (?max_size=)"};
  const Setting setting = lookup_setting("max_size");  // the environment's, else the files'
  if (setting.from_environment())
    return {setting.value.empty() ? 0 : parse_size("PCACHE_MAX_SIZE", setting.value),
            setting.source};
  bool present = false;
  const std::optional<std::string> stored = read_memo(kCapMemo, &present);
  bool unverified = present && !stored;  // damaged, forged, or signed with another secret
  if (stored && !stored->empty()) {
    try {
      return {parse_size("stored max_size", *stored), "the cache (progcache config)"};
    } catch (const Error &e) {
      set_thread_warning(std::string(e.what()) + "; ignored");
      unverified = true;
    }
  }
  if (unverified && !(setting.set() && !setting.value.empty())) {
    // A cap was stored but cannot be believed: never none. The default cache's default, which
    // `progcache config max_size` sets again.
    set_thread_warning("the cap stored in " + display_uri() +
                       " cannot be verified; the default cap applies until `progcache config "
                       "max_size` sets one again");
    return {kDefaultCap, "the default (the stored cap cannot be verified)"};
  }
  if (setting.set() && !setting.value.empty())
    return {parse_size("max_size in " + setting.source, setting.value), setting.source};
  if (is_default_) return {kDefaultCap, "the default for the default cache"};
  return {0, ""};
}

void Cache::store_cap(std::optional<uint64_t> bytes) {
  const std::string value = bytes ? std::to_string(*bytes) : std::string();
  const Blob record = encode_entry(ByteView(kCapMemo), {}, ByteView(value), mac_.get());
  backend_->put_meta(kCapMemo, record.view());
}

std::optional<std::string> Cache::load_memo(std::string_view name) {
  bool present = false;
  return read_memo(name, &present);
}

std::optional<std::string> Cache::read_memo(std::string_view name, bool *present) {
  *present = false;
  try {
    const std::optional<std::string> record = backend_->get_meta(name);
    if (!record) return std::nullopt;
    *present = true;
    std::string why;
    const auto parts = decode_entry(ByteView(*record), ByteView(name), true, &why, mac_.get());
    if (!parts || parts->compressed) return std::nullopt;
    return std::string(parts->payload.str());
  } catch (const Error &) {
    return std::nullopt;
  }
}

void Cache::save_memo(std::string_view name, std::string_view value) {
  try {
    const Blob record = encode_entry(ByteView(name), {}, ByteView(value), mac_.get());
    backend_->put_meta(name, record.view());
  } catch (const Error &) {  // a memo only saves work: the next process redoes it
  }
}

}  // namespace progcache
