#include "util/settings.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "util/env.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/paths.hpp"
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

constexpr off_t kMaxConfigBytes = 1 << 20;

std::string trimmed(std::string_view s) {
  const size_t b = s.find_first_not_of(" \t\r\f\v");
  if (b == std::string_view::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\f\v");
  return std::string(s.substr(b, e - b + 1));
}

// A value as written after '=': an inline comment ('#' or ';' after white space, as git reads
// them) is dropped; "double quotes" keep such characters (\" and \\ inside them). Returns
// false for an unterminated quote.
bool parse_value(std::string_view text, std::string *value) {
  const std::string t = trimmed(text);
  value->clear();
  if (!t.empty() && t[0] == '"') {
    size_t i = 1;
    for (; i < t.size() && t[i] != '"'; ++i) {
      if (t[i] == '\\' && i + 1 < t.size() && (t[i + 1] == '"' || t[i + 1] == '\\')) ++i;
      *value += t[i];
    }
    if (i >= t.size()) return false;
    const std::string rest = trimmed(std::string_view(t).substr(i + 1));
    return rest.empty() || rest[0] == '#' || rest[0] == ';';
  }
  for (size_t i = 0; i < t.size(); ++i) {
    if ((t[i] == '#' || t[i] == ';') && i > 0 && (t[i - 1] == ' ' || t[i - 1] == '\t')) break;
    *value += t[i];
  }
  *value = trimmed(*value);
  return true;
}

// One line of a config file into file (a setting, or a warning naming path:line).
void parse_line(const std::string &path, size_t number, std::string_view line, std::string *section,
                ParsedFile *file) {
  const std::string where = "config file " + path + ":" + std::to_string(number);
  const std::string t = trimmed(line);
  if (t.empty() || t[0] == '#' || t[0] == ';') return;
  if (t[0] == '[') {
    *section = t.back() == ']' ? t.substr(1, t.size() - 2) : t;
    return;
  }
  const size_t eq = t.find('=');
  std::string value;
  if (eq == std::string::npos || eq == 0 ||
      !parse_value(std::string_view(t).substr(eq + 1), &value)) {
    file->warnings.push_back(where + ": not 'key = value'; ignored");
    return;
  }
  const std::string name = trimmed(std::string_view(t).substr(0, eq));
  bool known = false;
  for (const SettingSpec &spec : setting_specs()) known |= name == spec.key;
  if (!known || !section->empty()) {
    file->warnings.push_back(where + ": unknown setting '" +
                             (section->empty() ? "" : *section + ".") + name +
                             "' ignored (known: cache_uri, max_size, secret_file, allow_shared, "
                             "umask)");
    return;
  }
  file->values[name] = value;
}

// Whether the group that may write st is this user's own: its primary group, named as the user
// is (a user private group, where umask 002 makes every file group-writable).
bool group_is_private(const struct stat &st) {
  if (st.st_gid != ::getegid()) return false;
  char buf[4096];
  struct passwd pw, *user = nullptr;
  struct group gr, *group = nullptr;
  return ::getpwuid_r(::geteuid(), &pw, buf, sizeof buf / 2, &user) == 0 && user &&
         ::getgrgid_r(st.st_gid, &gr, buf + sizeof buf / 2, sizeof buf / 2, &group) == 0 && group &&
         std::strcmp(user->pw_name, group->gr_name) == 0;
}

// A config file, and its directory, that only this user (or root) can change: owned by one of
// them, writable by no other user (a user private group aside), the directory also when sticky
// and root's (like /tmp).
bool config_file_is_ours(const std::string &path, const struct stat &st) {
  auto private_to_owner = [](const struct stat &s) {
    return (s.st_uid == 0 || s.st_uid == ::geteuid()) && !(s.st_mode & S_IWOTH) &&
           (!(s.st_mode & S_IWGRP) || group_is_private(s));
  };
  struct stat dir;
  return private_to_owner(st) && ::stat(parent_dir(path).c_str(), &dir) == 0 &&
         (private_to_owner(dir) || (dir.st_uid == 0 && (dir.st_mode & S_ISVTX)));
}

// Reads a regular file of at most kMaxConfigBytes, whatever its lines' lengths: a FIFO, a device
// (a symbolic link to /dev/zero) or a huge file is refused with a warning, never waited on.
ParsedFile parse_file(const std::string &path) {
  ParsedFile parsed;
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return parsed;
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    parsed.warnings.push_back("config file " + path + " is not a regular file; ignored");
    return parsed;
  }
  if (st.st_size > kMaxConfigBytes) {
    parsed.warnings.push_back("config file " + path + " is larger than 1 MiB; ignored");
    return parsed;
  }
  // It names the cache, its secret and whether shared directories are trusted: one another user
  // can change could point this user's processes at binaries they planted.
  if (!config_file_is_ours(path, st)) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    parsed.warnings.push_back("config file " + path + " (uid " + std::to_string(st.st_uid) +
                              ", mode " + mode +
                              ") or its directory can be changed by another user; ignored (it "
                              "names the cache and its secret): own it and chmod o-w, g-w");
    return parsed;
  }
  std::string text(size_t(st.st_size), '\0');
  if (!pread_all(fd.get(), text.data(), text.size(), 0)) {
    parsed.warnings.push_back("config file " + path + " cannot be read; ignored");
    return parsed;
  }
  std::string section;
  size_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    parse_line(path, ++number, std::string_view(text).substr(at, end - at), &section, &parsed);
    at = end + 1;
  }
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
  std::string warnings;
  for (const std::string &w : file.warnings) warnings += (warnings.empty() ? "" : "; ") + w;
  if (!warnings.empty()) set_thread_warning(warnings);
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
  else if (const std::string home = home_dir(); !home.empty())
    paths.push_back(home + "/.config/progcache/progcache.conf");
  return paths;
}

std::string home_dir() {
  // A relative $HOME (a sandbox's "HOME=.") would put the default cache and the config file
  // under each working directory: a different cache in every one.
  if (const char *home = trusted_env("HOME"); home && *home == '/') return home;
  if (process_is_privileged()) return "";  // the caller's home is not the effective user's
  char buf[4096];
  struct passwd pw, *user = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &user) == 0 && user && user->pw_dir &&
      user->pw_dir[0] == '/')
    return user->pw_dir;
  return "";
}

std::string expand_home(const std::string &path, std::string_view what) {
  if (path.empty() || path[0] != '~') return path;
  if (path.size() > 1 && path[1] != '/')
    throw Error(Status::invalid_arg, std::string(what) +
                                         ": only a leading ~/ is expanded (to your home "
                                         "directory); write ~user's home out, or ./" +
                                         path + " for a directory of that name");
  const std::string home = home_dir();
  if (home.empty())
    throw Error(Status::invalid_arg,
                std::string(what) + " starts with ~, but there is no home directory");
  return home + path.substr(1);
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

namespace {
std::string lower(std::string_view text) {
  std::string v(text);
  for (char &c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  return v;
}
}  // namespace

bool setting_is_true(const Setting &s) {
  const std::string v = lower(s.value);
  return v == "1" || v == "true" || v == "yes" || v == "on";
}

bool flag_is_off(std::string_view value) {
  const std::string v = lower(value);
  return v.empty() || v == "0" || v == "false" || v == "no" || v == "off";
}

}  // namespace progcache
