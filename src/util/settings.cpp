#include "util/settings.hpp"

#include <ini.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>

#include "util/env.hpp"
#include "util/error.hpp"
#include "util/trust.hpp"
#include "util/warning.hpp"

namespace progcache {
namespace {

struct FileRead {
  std::string_view wanted;
  std::string path;
  Setting found;
};

int on_value(void *user, const char *section, const char *name, const char *value) {
  auto *read = static_cast<FileRead *>(user);
  bool known = false;
  for (const SettingSpec &s : setting_specs()) known |= name == std::string_view(s.key);
  if (!known || (section && *section)) {
    set_thread_warning("config file " + read->path + ": unknown setting '" +
                       (section && *section ? std::string(section) + "." : std::string()) + name +
                       "' ignored (known: cache_uri, max_size, secret_file, allow_shared)");
    return 1;
  }
  if (name == read->wanted) read->found = Setting{value, read->path};  // the last one wins
  return 1;
}

// key from the file at path, if the file has it.
Setting read_file_setting(const std::string &path, std::string_view key) {
  FileRead read{key, path, {}};
  FILE *f = std::fopen(path.c_str(), "re");
  if (!f) return {};
  const int bad_line = ini_parse_file(f, on_value, &read);
  std::fclose(f);
  if (bad_line > 0)
    set_thread_warning("config file " + path + ": line " + std::to_string(bad_line) +
                       " is not 'key = value'; read up to it");
  return read.found;
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
