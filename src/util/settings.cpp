#include "util/settings.hpp"

#include <ini.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "util/env.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/stat_identity.hpp"
#include "util/trust.hpp"
#include "util/warning.hpp"

namespace progcache {
namespace {

// A config file as parsed: its settings (the last of a key wins) and the warnings parsing it
// raised, in order.
struct ParsedFile {
  std::map<std::string, std::string, std::less<>> values;
  std::vector<std::string> warnings;
};

int on_value(void *user, const char *section, const char *name, const char *value) {
  auto *file = static_cast<std::pair<const std::string *, ParsedFile *> *>(user);
  bool known = false;
  for (const SettingSpec &s : setting_specs()) known |= name == std::string_view(s.key);
  if (!known || (section && *section)) {
    file->second->warnings.push_back(
        "config file " + *file->first + ": unknown setting '" +
        (section && *section ? std::string(section) + "." : std::string()) + name +
        "' ignored (known: cache_uri, max_size, secret_file, allow_shared, umask)");
    return 1;
  }
  file->second->values[name] = value;
  return 1;
}

ParsedFile parse_file(const std::string &path) {
  ParsedFile parsed;
  FILE *f = std::fopen(path.c_str(), "re");
  if (!f) return parsed;
  std::pair<const std::string *, ParsedFile *> user{&path, &parsed};
  const int bad_line = ini_parse_file(f, on_value, &user);
  std::fclose(f);
  if (bad_line > 0)
    parsed.warnings.push_back("config file " + path + ": line " + std::to_string(bad_line) +
                              " is not 'key = value'; read up to it");
  return parsed;
}

// The file at path, parsed once per process while stat shows it unchanged (a cache's open
// looks up several settings; each used to parse both files again). A file changed in the last
// 2 s is parsed each time, as the header memos treat such files.
ParsedFile read_config_file(const std::string &path) {
  static ForkSafeMutex mutex;
  static std::map<std::string, std::pair<std::string, ParsedFile>> parsed;  // path -> (stat, file)
  struct stat st;
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists) return {};
  const StatIdentity id = StatIdentity::of(st);
  {
    std::lock_guard lock(mutex);
    if (auto it = parsed.find(path); it != parsed.end() && it->second.first == id.text())
      return it->second.second;
  }
  ParsedFile file = parse_file(path);
  if (!id.is_racy()) {
    std::lock_guard lock(mutex);
    parsed[path] = {id.text(), file};
  }
  return file;
}

// key from the file at path, if the file has it; the file's warnings raised again.
Setting read_file_setting(const std::string &path, std::string_view key) {
  const ParsedFile file = read_config_file(path);
  for (const std::string &w : file.warnings) set_thread_warning(w);
  auto it = file.values.find(key);
  return it == file.values.end() ? Setting{} : Setting{it->second, path};
}

}  // namespace

const std::vector<SettingSpec> &setting_specs() {
  static const std::vector<SettingSpec> specs = {
      {"cache_uri", "PCACHE_URI", "the cache used when a program names none"},
      {"max_size", "PCACHE_MAX_SIZE",
       "the size cap of caches opened without one (0 = none; below a cap stored in the cache)"},
      {"secret_file", "PCACHE_SECRET_FILE", "a 0600 file whose bytes sign and verify entries"},
      {"allow_shared", "PCACHE_ALLOW_SHARED",
       "trust cache directories other users own or can write (a team cache)"},
      {"umask", "PCACHE_UMASK",
       "shared caches: the permission bits new files and directories are created without "
       "(octal, default 007)"},
  };
  return specs;
}

std::vector<std::string> config_file_paths() {
  std::vector<std::string> paths = {"/etc/progcache.conf"};
  if (process_is_privileged()) return paths;  // the user's file is the caller's, like the env
  if (const char *x = trusted_env("XDG_CONFIG_HOME"); x && *x == '/')
    paths.push_back(std::string(x) + "/progcache/progcache.conf");
  else if (const char *home = trusted_env("HOME"); home && *home)
    paths.push_back(std::string(home) + "/.config/progcache/progcache.conf");
  return paths;
}

Setting lookup_setting(std::string_view key) {
  const auto spec = std::find_if(setting_specs().begin(), setting_specs().end(),
                                 [&](const SettingSpec &s) { return key == s.key; });
  if (spec == setting_specs().end()) return {};
  if (const char *v = trusted_env(spec->env))
    return Setting{v, std::string("environment (") + spec->env + ")"};
  Setting found;
  for (const std::string &path : config_file_paths())  // later files override earlier ones
    if (Setting s = read_file_setting(path, key); s.set()) found = std::move(s);
  return found;
}

CreateModes create_modes(bool shared) {
  if (!shared) return {};
  const Setting s = lookup_setting("umask");
  unsigned mask = 007;
  if (!s.value.empty()) {
    if (s.value.size() > 4 || s.value.find_first_not_of("01234567") != std::string::npos)
      throw Error(Status::invalid_arg, "umask '" + s.value + "' (" + s.source +
                                           ") is not an octal mode such as 007 or 002");
    mask = unsigned(std::stoul(s.value, nullptr, 8));
    if (mask > 0777)
      throw Error(Status::invalid_arg,
                  "umask '" + s.value + "' (" + s.source + ") is larger than 777");
  }
  return {mode_t((0777 & ~mask) | 0700), mode_t((0666 & ~mask) | 0600)};
}

bool setting_is_true(const Setting &s) {
  std::string v = s.value;
  for (char &c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

}  // namespace progcache
