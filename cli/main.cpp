// progcache: the command-line tool over libprogcache. Parses the command line with getopt_long
// against the command table (cli/commands.cpp), opens the cache as the command asks, runs it.
// Exit codes: 0 success, 1 the operation failed (or a get missed), 2 usage error. Errors go to
// stderr as one line.
#include <dlfcn.h>
#include <getopt.h>
#include <openssl/crypto.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"

using namespace progcache::cli;

namespace {

// Whether the command passes what follows "--" on (to NVRTC).
bool takes_passthrough(const Command &c) {
  return std::strstr(c.synopsis, "[-- ") != nullptr;
}

// ccache's options, which users type by habit, as the commands that do the same: -s stats,
// -z zero the counters, -C clear, -c prune to the cap, -M SIZE store a cap, -p the settings,
// -V version. Only where the command's name would be (after the global options), where no
// command's own option can be.
std::vector<std::string> translate_ccache_habits(std::vector<std::string> args) {
  static const std::pair<const char *, std::vector<std::string>> kHabits[] = {
      {"-s", {"stats"}},
      {"-z", {"stats", "--zero"}},
      {"-C", {"clear"}},
      {"-c", {"prune"}},
      {"-p", {"config"}},
      {"-V", {"version"}},
      {"-M", {"config", "max_size"}}};
  size_t at = 0;
  while (at + 1 < args.size() && (args[at] == "--cache" || args[at] == "--max-size")) at += 2;
  if (at >= args.size()) return args;
  for (const auto &[flag, command] : kHabits) {
    if (args[at] != flag) continue;
    args.erase(args.begin() + long(at));
    args.insert(args.begin() + long(at), command.begin(), command.end());
    return args;
  }
  return args;
}

// The first operand that is not the value of a global option: the command's name.
std::string find_command_name(const std::vector<std::string> &args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    if (a == "--cache" || a == "--max-size") {
      ++i;
    } else if (a.empty() || a[0] != '-') {
      return a;
    }
  }
  return "";
}

// Parses args (argv without the program name, up to "--") for command c into `in`.
void parse_options(const Command *c, std::vector<std::string> args, Invocation &in) {
  std::vector<OptionSpec> specs = global_options();
  if (c) specs.insert(specs.end(), c->options.begin(), c->options.end());
  std::vector<option> longs;
  std::string shorts = ":";  // ':' first: a missing value is reported as ':', not '?'
  for (size_t i = 0; i < specs.size(); ++i) {
    longs.push_back({specs[i].name, specs[i].value_name ? required_argument : no_argument, nullptr,
                     int(1000 + i)});
    if (specs[i].short_name)
      shorts += std::string(1, specs[i].short_name) + (specs[i].value_name ? ":" : "");
  }
  longs.push_back({nullptr, 0, nullptr, 0});
  std::vector<char *> argv{const_cast<char *>("progcache")};
  for (std::string &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  opterr = 0;
  optind = 1;
  for (;;) {
    const int argc = int(argv.size() - 1);
    const int opt = getopt_long(argc, argv.data(), shorts.c_str(), longs.data(), nullptr);
    if (opt == -1) break;
    if (opt == '?') {
      const std::string bad = optopt ? std::string("-") + char(optopt) : argv[optind - 1];
      throw Usage("unknown option '" + bad + "'" +
                  (c && takes_passthrough(*c) ? " (NVRTC options go after --)" : "") +
                  "; see progcache " + (c ? std::string(c->name) + " " : "") + "--help");
    }
    if (opt == ':') throw Usage(std::string(argv[optind - 1]) + " needs a value");
    const OptionSpec *spec = nullptr;
    if (opt >= 1000)
      spec = &specs[size_t(opt - 1000)];
    else
      for (const OptionSpec &s : specs)
        if (s.short_name == opt) spec = &s;
    in.options[spec->name].push_back(optarg ? optarg : "");
  }
  for (int i = optind; i < int(argv.size() - 1); ++i) in.args.emplace_back(argv[size_t(i)]);
}

// The global options into the invocation: the cache URI and the cap.
void take_global_options(Invocation &in) {
  in.uri = in.value("cache");
  if (in.has("max-size")) {
    if (pcache_admin_parse_size(in.value("max-size").c_str(), &in.cap) != PCACHE_OK)
      throw Usage("--max-size: " + library_message());
    in.cap_given = true;
  }
}

// This tool is its own process: nothing in it looks an OpenSSL algorithm up by a legacy name,
// so OpenSSL need not copy its legacy name tables on the first digest (a fifth of a fresh hit's
// instructions). The library leaves that choice to its host (src/util/openssl_init.hpp) and opens
// libcrypto only when it first hashes (src/util/libcrypto.hpp), so the flags are set here, in the
// same copy of libcrypto, for the commands that hash; the others never map libcrypto at all
// (0.7-0.8 ms of `version`, `stats`, `ls`, `run`), or, where a secret makes them check a MAC,
// map it with OpenSSL's default tables. `compile` is not among them: its hit on an unsigned cache
// hashes nothing (src/core/identity_memo.hpp), and loading libcrypto for the flags cost it
// 1.8 ms (3.7 against 5.4 ms a process); a signed cache's compile pays ~0.3 ms for the tables.
void init_openssl_for(const Command &command) {
  static const char *const kHashing[] = {"link", "deps", "explain", "verify", "export", "import"};
  if (std::none_of(std::begin(kHashing), std::end(kHashing),
                   [&](const char *name) { return std::strcmp(name, command.name) == 0; }))
    return;
  using Init = int (*)(uint64_t, const OPENSSL_INIT_SETTINGS *);
  void *crypto = ::dlopen(PCACHE_LIBCRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (auto init = crypto ? reinterpret_cast<Init>(::dlsym(crypto, "OPENSSL_init_crypto")) : nullptr)
    init(OPENSSL_INIT_NO_ADD_ALL_CIPHERS | OPENSSL_INIT_NO_ADD_ALL_DIGESTS, nullptr);
}

int run(int argc, char **argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  Invocation in;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i] == "--") {  // everything after belongs to the command (NVRTC options)
      in.passthrough.assign(args.begin() + long(i) + 1, args.end());
      args.resize(i);
      break;
    }
  if (args == std::vector<std::string>{"--version"}) args = {"version"};
  args = translate_ccache_habits(std::move(args));
  in.command = find_command_name(args);
  const Command *command = find_command(in.command);
  if (!in.command.empty() && !command)
    throw Usage("unknown command '" + in.command + "' (see progcache --help)");
  parse_options(command, args, in);
  if (command) in.args.erase(in.args.begin());  // the command's name
  if (in.has("help")) {
    std::fputs(command ? command_help(*command).c_str() : overview().c_str(), stdout);
    return 0;
  }
  if (!command) {
    std::fputs(overview().c_str(), stderr);
    return 2;
  }
  if (in.args.size() < command->min_args || in.args.size() > command->max_args)
    throw Usage(
        std::string(command->name) + " takes " +
        (command->min_args == command->max_args
             ? std::to_string(command->min_args)
             : std::to_string(command->min_args) + " to " + std::to_string(command->max_args)) +
        " operand(s), got " + std::to_string(in.args.size()) + "; see progcache " + command->name +
        " --help");
  if (!in.passthrough.empty() && !takes_passthrough(*command))
    throw Usage(std::string(command->name) + " takes nothing after --");
  take_global_options(in);
  init_openssl_for(*command);
  CacheHandle cache;
  Opens opens = command->opens;
  // `config max_size SIZE` stores a setting: it may create the cache it configures.
  if (std::string(command->name) == "config" && !in.args.empty()) opens = Opens::reading;
  if (opens != Opens::nothing) {
    // Only commands that store apply a cap (and so may evict when it is smaller than what is
    // stored): `progcache --max-size 1K stats` used to evict every entry.
    const uint64_t cap = opens != Opens::storing ? 0
                         : in.cap_given          ? in.cap
                                                 : PCACHE_MAX_SIZE_CONFIGURED;
    try {
      cache = open_cache(in.uri, cap, opens == Opens::existing || opens == Opens::existing_or_none);
    } catch (const Failure &e) {
      // deps answers from the include scan where nothing was ever compiled: on a machine whose
      // cache is still to be made, that is its answer, not "no cache".
      if (opens != Opens::existing_or_none || e.status != PCACHE_NOT_FOUND) throw;
    }
    in.cache = cache.get();
  }
  return command->run(in);
}

}  // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const Usage &e) {
    std::fprintf(stderr, "progcache: %s\n", e.what());
    return 2;
  } catch (const Failure &e) {
    std::fprintf(stderr, "progcache: %s\n", e.what());
    return e.status == PCACHE_ERR_INVALID_ARG ? 2 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "progcache: internal error: %s\n", e.what());
    return 1;
  }
}
