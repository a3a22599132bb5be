// The progcache command: what its source files share. The command uses only the public and the
// admin API of libprogcache (progcache.h, progcache_admin.h), like any other program would.
#pragma once

#define PCACHE_ADMIN_UNSTABLE 1
#include <unistd.h>

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "progcache/progcache.h"
#include "progcache/progcache_admin.h"

namespace progcache::cli {

// A usage error: exit status 2.
struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A library call that failed: its status and pcache_last_error() (exit status 2 for
// PCACHE_ERR_INVALID_ARG, else 1).
struct Failure : std::runtime_error {
  Failure(pcache_status s, const std::string &message) : std::runtime_error(message), status(s) {}
  pcache_status status;
};

// Throws Failure for an error status; prints the library's warning (pcache_last_error() after a
// call that did not fail) on stderr. Returns status (PCACHE_OK or PCACHE_NOT_FOUND).
pcache_status check(pcache_status status);
// pcache_last_error() without the "pcache_function: " prefix, for messages to people.
std::string library_message();

// Closes a descriptor this process opened (not standard input or output) on every way out.
struct OwnedFd {
  int fd;
  bool owned = true;
  ~OwnedFd() {
    if (owned && fd >= 0) ::close(fd);
  }
};

struct CloseCache {
  void operator()(pcache *cache) const;
};
using CacheHandle = std::unique_ptr<pcache, CloseCache>;
// Opens uri ("" = the default cache) with the given size cap (0 = none,
// PCACHE_MAX_SIZE_CONFIGURED = as configured). must_exist: a cache that is not there is a
// Failure ("no cache at PATH"), and nothing is created.
CacheHandle open_cache(const std::string &uri, uint64_t cap, bool must_exist = false);
struct FreeEntry {
  void operator()(pcache_entry *entry) const { pcache_entry_free(entry); }
};
using EntryHandle = std::unique_ptr<pcache_entry, FreeEntry>;

// Peeks at key: the entry, or null when it is absent or was damaged (then removed, and said on
// stderr). Throws Failure for anything else.
EntryHandle peek_entry(pcache *cache, std::string_view key);
// Calls fn for every entry's info (keys copied: fn may peek and delete).
struct ListedEntry {
  std::string key;
  uint64_t payload_size;
  int64_t last_use;
};
std::vector<ListedEntry> list_entries(pcache *cache);

pcache_admin_info cache_info(pcache *cache);
uint64_t entry_count(pcache *cache);

// What a command was given, parsed by the command table's option list.
struct Invocation {
  std::string command;
  std::map<std::string, std::vector<std::string>> options;  // long name -> values ("" for flags)
  std::vector<std::string> args;                            // operands
  std::vector<std::string> passthrough;                     // after "--"
  std::string uri;                                          // --cache ("" = the default)
  uint64_t cap = 0;                                         // --max-size
  bool cap_given = false;                                   // --max-size was given
  pcache *cache = nullptr;                                  // opened as the command asked

  bool has(const std::string &option) const { return options.count(option) != 0; }
  // The option's last value, or fallback.
  std::string value(const std::string &option, const std::string &fallback = "") const;
};

// An option of a command, for getopt_long, --help and the manual.
struct OptionSpec {
  const char *name;        // long name without "--"
  char short_name;         // 0 for none
  const char *value_name;  // nullptr for a flag
  const char *help;
};

// How a command needs the cache.
enum class Opens {
  nothing,           // no cache (version, help)
  existing,          // only a cache that exists, without a cap: reading and removing create nothing
  existing_or_none,  // as existing, and where there is none yet, run without one (deps)
  reading,           // opened without a cap: reading never evicts
  storing,           // opened with the cap: storing may evict down to it
};

struct Command {
  const char *name;
  const char *synopsis;     // operands and options, as in "progcache NAME SYNOPSIS"
  const char *summary;      // one line for the overview
  const char *description;  // the rest of "progcache NAME --help" and the manual
  std::vector<OptionSpec> options;
  size_t min_args, max_args;
  Opens opens;
  int (*run)(Invocation &);
};

// The command table (cli/commands.cpp), in the order help lists it.
const std::vector<Command> &commands();
const Command *find_command(std::string_view name);
// The options every command takes (--cache, --max-size, --help).
const std::vector<OptionSpec> &global_options();

// Help text from the table (cli/help.cpp).
std::string overview();
std::string command_help(const Command &command);
std::string manual_page();

// Output helpers (cli/output.cpp).
std::string human_size(uint64_t bytes);
std::string milliseconds(uint64_t us);
std::string nvrtc_text(uint32_t version);
std::string to_hex(const void *data, size_t size);
// A key as ls prints it: text:STRING when printable, else hex; and back.
std::string show_key(std::string_view key);
std::string parse_key(const std::string &text);
// s as a JSON string literal; bytes that are not UTF-8 become U+FFFD (cli/json.cpp).
std::string json_string(std::string_view s);
// Whole files; "-" is standard input / output.
std::string read_file(const std::string &path);
void write_file(const std::string &path, const void *data, size_t size);

// A progress line on stderr when it is a terminal (redrawn at most ten times a second, with a
// percentage when the total is known); silent otherwise, so logs and pipes stay clean.
class Progress {
 public:
  Progress(std::string what, uint64_t total);
  ~Progress();
  void update(uint64_t done, const std::string &detail = "");
  // Erases the line, before the command prints its result (the destructor does it too).
  void finish();
  Progress(const Progress &) = delete;
  Progress &operator=(const Progress &) = delete;

 private:
  std::string what_;
  uint64_t total_;
  bool on_terminal_;
  bool drawn_ = false;
  int64_t last_draw_ns_ = 0;
};

// Seconds since start, for "... in 1.23 s".
double seconds_since(int64_t start_ns);
int64_t now_ns();

}  // namespace progcache::cli
