// Help text and the manual page, generated from the command table (cli/commands.cpp) and the
// sections below, so that --help, `progcache help CMD` and progcache(1) never disagree.
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"

namespace progcache::cli {
namespace {

using Items = std::vector<std::pair<const char *, const char *>>;

constexpr const char *kCache =
    "The cache is --cache URI, else $PCACHE_URI, else sqlite:$PCACHE_DIR/cache.db,\n"
    "else $XDG_CACHE_HOME/progcache/cache.db, else ~/.cache/progcache/cache.db.\n"
    "URIs: memory:, sqlite:PATH, filestream:DIR, redis://HOST:PORT[/DB][?prefix=NAME],\n"
    "tiered:URI|URI|... (docs/backends.md).";

const Items kEnvironment = {
    {"PCACHE_URI, PCACHE_DIR", "where the default cache lives (see CACHE)"},
    {"PCACHE_MAX_SIZE",
     "the size cap for commands that store, e.g. 4G; 0: none; unset: the cache's own (progcache "
     "config), a config file's, else 5G for the default cache and none for another"},
    {"PCACHE_DISABLE=1", "compile always, store nothing"},
    {"PCACHE_NVRTC_LIBRARY", "the libnvrtc to use (default: the newest libnvrtc.so.N found)"},
    {"PCACHE_LIBCUDA", "the CUDA driver library (default: libcuda.so.1)"},
    {"PCACHE_SECRET_FILE",
     "a 0600 file whose bytes sign every stored entry and verify every entry read"},
    {"PCACHE_ALLOW_SHARED=1",
     "trust a cache directory other users own or can write, and create files the group can "
     "use (a team cache; docs/admin.md)"},
    {"PCACHE_UMASK", "shared caches: the bits new files are created without (default 007)"},
    {"PCACHE_REDIS_PASSWORD", "the Redis password when a redis:// URI has none"},
};

constexpr const char *kExitStatus =
    "0 success; 1 the operation failed, or get/rm found nothing, explain found a\n"
    "miss, verify found damage, import rejected a record; 2 usage error.";

const Items kExamples = {
    {"progcache compile kernel.cu --arch sm_90 -- -std=c++17", "compile through the cache"},
    {"progcache explain kernel.cu --arch sm_90 -- -std=c++17", "why it misses"},
    {"progcache stats --json", "counters for monitoring"},
    {"progcache --cache sqlite:/srv/pc/cache.db prune --max-size 20G",
     "evict down to 20 GiB (nightly, with verify)"},
    {"progcache export warm.pcb; progcache --cache filestream:/scratch/pc import warm.pcb",
     "ship a warmed cache"},
};

constexpr const char *kFiles =
    "~/.cache/progcache/cache.db (the default SQLite cache, with its -wal, -shm and -counters "
    "files).";

std::string option_text(const OptionSpec &o) {
  std::string s = o.short_name ? std::string("-") + o.short_name + ", " : "";
  s += std::string("--") + o.name;
  if (o.value_name) s += std::string(" ") + o.value_name;
  return s;
}

constexpr size_t kColumn = 30, kWidth = 80;

// text (line breaks in it are spaces) filled to kWidth columns, starting at column `column`,
// continuation lines indented by `indent`.
std::string fill(const std::string &text, size_t indent, size_t column) {
  std::string out;
  bool line_has_word = false;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find_first_of(" \n", i);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(i, end - i);
    i = end + 1;
    if (word.empty()) continue;
    if (line_has_word && column + 1 + word.size() > kWidth) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (line_has_word) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    line_has_word = true;
  }
  return out + "\n";
}

// "  head      text that wraps": a two-column help line (the text on the next line when head
// is too wide).
std::string item(const std::string &head, const std::string &text) {
  if (head.size() + 2 > kColumn)
    return head + "\n" + std::string(kColumn, ' ') + fill(text, kColumn, kColumn);
  return head + std::string(kColumn - head.size(), ' ') + fill(text, kColumn, kColumn);
}

// roff escapes: a backslash, and a leading '.' or '\'' that would read as a request.
std::string roff(const std::string &s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool line_start = i == 0 || s[i - 1] == '\n';
    if (s[i] == '\\') {
      out += "\\e";
    } else if (s[i] == '-') {
      out += "\\-";
    } else {
      if (line_start && (s[i] == '.' || s[i] == '\'')) out += "\\&";
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string overview() {
  std::string s =
      "usage: progcache [--cache URI] [--max-size SIZE] <command> [args]\n\ncommands:\n";
  for (const Command &c : commands()) {
    const std::string head = std::string("  ") + c.name + (*c.synopsis ? " " : "") + c.synopsis;
    s += item(head, c.summary);
  }
  s += "\noptions (before or after the command):\n";
  for (const OptionSpec &o : global_options()) s += item("  " + option_text(o), o.help);
  s += "\n" + fill(kCache, 0, 0) + "\nenvironment:\n";
  for (const auto &[name, what] : kEnvironment) s += item(std::string("  ") + name, what);
  s += "\nexit status:\n" + fill(kExitStatus, 0, 0);
  s += "Run 'progcache COMMAND --help' (or 'progcache help COMMAND') for one command.\n";
  return s;
}

std::string command_help(const Command &c) {
  std::string s = std::string("usage: progcache ") + c.name + (*c.synopsis ? " " : "") +
                  c.synopsis + "\n" + fill(c.description, 0, 0);
  if (!c.options.empty()) {
    s += "\noptions:\n";
    for (const OptionSpec &o : c.options) s += item("  " + option_text(o), o.help);
  }
  return s;
}

std::string manual_page() {
  std::string m = std::string(".TH PROGCACHE 1 \"\" \"progcache ") + PCACHE_VERSION_STRING +
                  "\" \"User Commands\"\n"
                  ".SH NAME\nprogcache \\- a cache for compiled CUDA programs\n"
                  ".SH SYNOPSIS\n.B progcache\n"
                  "[\\fB\\-\\-cache\\fR \\fIURI\\fR] [\\fB\\-\\-max\\-size\\fR \\fISIZE\\fR] "
                  "\\fICOMMAND\\fR [\\fIARGS\\fR]\n"
                  ".SH DESCRIPTION\n.B progcache\ncompiles CUDA C++ with NVRTC through a cache of "
                  "compiled programs and manages that cache.\n.SH COMMANDS\n";
  for (const Command &c : commands()) {
    m +=
        ".TP\n\\fB" + roff(c.name) + "\\fR " + roff(c.synopsis) + "\n" + roff(c.description) + "\n";
    for (const OptionSpec &o : c.options)
      m += ".RS\n.TP\n\\fB" + roff(option_text(o)) + "\\fR\n" + roff(o.help) + "\n.RE\n";
  }
  m += ".SH OPTIONS\n";
  for (const OptionSpec &o : global_options())
    m += ".TP\n\\fB" + roff(option_text(o)) + "\\fR\n" + roff(o.help) + "\n";
  m += ".SH CACHE\n" + roff(kCache) + "\n.SH ENVIRONMENT\n";
  for (const auto &[name, what] : kEnvironment)
    m += ".TP\n.B " + roff(name) + "\n" + roff(what) + "\n";
  m +=
      ".SH FILES\n" + roff(kFiles) + "\n.SH EXIT STATUS\n" + roff(kExitStatus) + "\n.SH EXAMPLES\n";
  for (const auto &[command, what] : kExamples)
    m += ".TP\n.B " + roff(command) + "\n" + roff(what) + "\n";
  m += ".SH SEE ALSO\nThe C header progcache/progcache.h (package libprogcache\\-dev), and the "
       "docs/ folder of the progcache sources: admin.md, cli.md, backends.md, security.md.\n";
  return m;
}

int cmd_help(Invocation &in) {
  if (in.has("man")) {
    if (!in.args.empty()) throw Usage("help --man takes no COMMAND");
    std::fputs(manual_page().c_str(), stdout);
    return 0;
  }
  if (in.args.empty()) {
    std::fputs(overview().c_str(), stdout);
    return 0;
  }
  const Command *c = find_command(in.args[0]);
  if (!c) throw Usage("unknown command '" + in.args[0] + "' (see progcache --help)");
  std::fputs(command_help(*c).c_str(), stdout);
  return 0;
}

int cmd_version(Invocation &) {
  std::printf("progcache %s (library %s)\n", PCACHE_VERSION_STRING, pcache_version_string());
  return 0;
}

}  // namespace progcache::cli
