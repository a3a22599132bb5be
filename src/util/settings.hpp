// Settings that are not per call: each has an environment variable and a key in the config
// files (`key = value` lines). The environment wins over the user's file
// ($XDG_CONFIG_HOME/progcache/progcache.conf, else ~/.config/progcache/progcache.conf), which
// wins over the system's (/etc/progcache.conf). In a setuid/setgid process only the system file
// counts: the environment and the user's file are the caller's (docs/admin.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "util/fsutil.hpp"

namespace progcache {

struct SettingSpec {
  const char *key;  // in the config files
  const char *env;  // the environment variable
  const char *help;
};

// Every setting, in the order `progcache config` lists them.
const std::vector<SettingSpec> &setting_specs();

struct Setting {
  std::string value;
  std::string source;  // "" (unset), "environment (PCACHE_X)", or the file's path
  bool set() const { return !source.empty(); }
  bool from_environment() const { return source.rfind("environment", 0) == 0; }
};

// The setting named key (one of setting_specs()), from the first source that has it. A file
// that cannot be parsed, or holds an unknown key, is reported as a thread warning and read as
// far as it goes; a missing file is no setting.
Setting lookup_setting(std::string_view key);

// The config files looked at, system first (the user's is absent in privileged processes).
std::vector<std::string> config_file_paths();

// The user's home: $HOME, else (unset, empty or relative, as under `env -i`, cron, a service
// or a sandbox) the passwd entry's directory; "" in a privileged process without a trusted $HOME,
// or if neither names an absolute path.
std::string home_dir();

// path with a leading "~" or "~/" made home_dir(), as a shell would have: a path set where no
// shell expands it (a service's or a container's environment, a config file, os.environ) would
// otherwise name a directory called "~" under the working directory. Throws
// Error(invalid_arg), its message starting with what (which quotes path), for "~user" (not
// guessed at) or when there is no home.
std::string expand_home(const std::string &path, std::string_view what);

// "1", "true", "yes", "on" (any case): a boolean setting that is on.
bool setting_is_true(const Setting &s);
// "", "0", "false", "no", "off" (any case): a flag that is off (every other value is on).
bool flag_is_off(std::string_view value);

// The modes a cache creates what it stores with. Private caches: 0700/0600. Shared ones
// (allow_shared): 0777/0666 less the umask setting ($PCACHE_UMASK, umask in the config files;
// default 007, so the group may read and write and others nothing), always with the owner's
// bits. Throws Error(invalid_arg) for a umask that is not octal 0-777.
CreateModes create_modes(bool shared);

}  // namespace progcache
