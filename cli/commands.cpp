// The command table: every command's name, operands, options, help and how it opens the cache.
// Parsing (cli/main.cpp), --help, `progcache help CMD` and the manual (cli/help.cpp) all read it.
#include "commands.hpp"

#include "program.hpp"

namespace progcache::cli {
namespace {

std::vector<OptionSpec> with_compile_options(std::vector<OptionSpec> extra) {
  std::vector<OptionSpec> all = compile_options();
  all.insert(all.end(), extra.begin(), extra.end());
  return all;
}

std::vector<Command> make_commands() {
  return {
      {"compile", "FILE [OPTIONS] [-- OPTIONS...]",
       "compile through the cache; print hit or miss and the time",
       "Compiles FILE through the cache: CUDA C++ with NVRTC, FILE.ptx to a cubin with\n"
       "nvJitLink, FILE.ll or FILE.bc (NVVM IR) to PTX or LTO-IR with libNVVM (--module adds\n"
       "modules; -use-libdevice after -- links libdevice). The program name is FILE as given,\n"
       "so quoted includes are found beside it; -I DIR and the library's other options go after\n"
       "--. Prints 'hit' or 'miss', the time taken, the binary's size and key, and the lowered\n"
       "name of each --name-expression; the library's log (warnings, -Xptxas -v) goes to\n"
       "stderr, replayed from the stored log on a hit.",
       with_compile_options({{"output", 'o', "OUT",
                              "write the binary to OUT (- = stdout, which then holds it alone: the "
                              "report goes to stderr)"}}),
       1, 1, Opens::storing, cmd_compile},
      {"link",
       "INPUT... [OPTIONS] [-- NVJITLINK-OPTIONS...]",
       "link with nvJitLink through the cache; print hit or miss and the time",
       "Links the inputs, in order, with nvJitLink through the cache, as pcache_link does; each\n"
       "input's kind comes from its extension: .cubin .ptx .ltoir .fatbin .o (host object) .a\n"
       "(host library). -arch=sm_90 unless --arch or an option after -- names one. Prints as\n"
       "compile does; nvJitLink's log goes to stderr.",
       {{"arch", 0, "SM", "the GPU architecture (-arch=SM, default sm_90)"},
        {"lto", 0, nullptr, "link-time optimisation (-lto), for LTO-IR inputs"},
        {"target", 0, "cubin|ptx", "what to make (default cubin; ptx needs --lto)"},
        {"output", 'o', "OUT",
         "write the binary to OUT (- = stdout, which then holds it alone: the report goes to "
         "stderr)"}},
       1,
       1024,
       Opens::storing,
       cmd_link},
      {"deps", "FILE.cu [OPTIONS] [-- NVRTC-OPTIONS...]",
       "list the header paths the key covers (found or absent)",
       "Lists what the key of FILE covers on disk, in the order NVRTC would look: 'present PATH'\n"
       "for each header read, 'absent PATH' for each place looked at that held nothing (creating\n"
       "a file there changes the key). A program never compiled through the cache (or with no\n"
       "cache yet, which deps does not create) is listed from a scan of its #include lines: a\n"
       "note on stderr says so, and what the scan could not follow. Exit status 1 if the\n"
       "program cannot be cached, with why.",
       compile_options(), 1, 1, Opens::existing_or_none, cmd_deps},
      {"explain", "FILE.cu [OPTIONS] [-- NVRTC-OPTIONS...]",
       "say why it would miss: the key fields that differ from the closest entry",
       "Derives FILE's key as compile would and, on a miss, names every key field that differs\n"
       "from the closest stored entry with the same program name. Exit status 0 on a hit, 1 on a\n"
       "miss or an uncacheable program.",
       compile_options(), 1, 1, Opens::existing, cmd_explain},
      {"stats",
       "[--zero | --json]",
       "entries, size, cap and the counters shared by all processes",
       "Entries, stored bytes, the cap and how full it is, and the hit, miss and eviction\n"
       "counters and compile time saved, shared by every process using the cache (per tier for a\n"
       "tiered cache). clear removes entries and leaves the counters; --zero does the reverse.",
       {{"zero", 'z', nullptr, "set the shared counters to zero (like ccache -z); entries stay"},
        {"json", 0, nullptr, "print one JSON object (docs/cli.md)"}},
       0,
       0,
       Opens::existing,
       cmd_stats},
      {"ls",
       "[--json]",
       "key, size, target and last use of every entry",
       "One line per entry: key, size, target, NVRTC version, last use. Listing is a peek: it\n"
       "counts no hit and changes no entry's recency.",
       {{"json", 0, nullptr, "print one JSON object (docs/cli.md)"}},
       0,
       0,
       Opens::existing,
       cmd_ls},
      {"get",
       "KEY -o FILE",
       "write an entry's bytes to FILE",
       "KEY is hex (as ls prints it) or text:STRING; FILE - is standard output, which then holds\n"
       "the bytes and nothing else. Exit status 1 on a miss.",
       {{"output", 'o', "FILE", "where to write the bytes (- = stdout)"}},
       1,
       1,
       Opens::existing,
       cmd_get},
      {"put",
       "KEY FILE",
       "store FILE's bytes under KEY",
       "FILE - is standard input.",
       {},
       2,
       2,
       Opens::storing,
       cmd_put},
      {"rm",
       "KEY",
       "remove an entry",
       "Exit status 1 if there was no such entry.",
       {},
       1,
       1,
       Opens::existing,
       cmd_rm},
      {"clear",
       "",
       "remove every entry",
       "Removes every entry; the shared counters stay (stats --zero resets them).",
       {},
       0,
       0,
       Opens::existing,
       cmd_clear},
      {"prune",
       "[--max-size SIZE]",
       "evict least-recently-used entries down to SIZE or the configured cap",
       "Evicts least-recently-used entries until the stored payloads fit SIZE (500M, 10G,\n"
       "1048576), or without --max-size the configured cap (progcache config). Redis caches are "
       "not pruned (Redis evicts by its maxmemory policy); prune each\n"
       "local tier of a tiered cache by its own URI.",
       {},
       0,
       0,
       Opens::nothing,
       cmd_prune},
      {"config",
       "[max_size SIZE|none]",
       "the settings in force and where each comes from",
       "Lists the settings that apply to the cache (cache_uri, max_size, secret_file,\n"
       "allow_shared, umask) with where each comes from: the environment, a config file\n"
       "(/etc/progcache.conf, then ~/.config/progcache/progcache.conf), the cache itself, or the\n"
       "default. 'config max_size 5G' stores a cap in the cache itself, applied by every process\n"
       "that opens it without a cap of its own ($PCACHE_MAX_SIZE or a URI's ?max_size= win over\n"
       "it); 'config max_size none' removes it. docs/admin.md.",
       {},
       0,
       2,
       Opens::existing,
       cmd_config},
      {"verify",
       "",
       "read every entry; report and remove damaged ones",
       "Reads and checks every entry (checksum, and MAC with a secret); damaged ones are removed\n"
       "and reported. Exit status 1 when damage was found (and removed), like fsck. A progress\n"
       "line is shown on a terminal.",
       {},
       0,
       0,
       Opens::existing,
       cmd_verify},
      {"evict",
       "--older-than AGE | --nvrtc-version V",
       "remove entries unused for AGE, or compiled by NVRTC V",
       "AGE: 30d, 12h, 15m, 45s. V: an NVRTC version such as 12.4 or 13.0.",
       {{"older-than", 0, "AGE", "remove entries not used for AGE"},
        {"nvrtc-version", 0, "V", "remove entries compiled by NVRTC V"}},
       0,
       0,
       Opens::existing,
       cmd_evict},
      {"export",
       "FILE",
       "write every entry to one bundle file (- = stdout)",
       "Writes every entry (payload and metadata, verified, compressed, signed when a secret is\n"
       "configured) to one portable bundle; - writes to stdout. A progress line is shown on a\n"
       "terminal.",
       {},
       1,
       1,
       Opens::existing,
       cmd_export},
      {"import",
       "FILE",
       "verify and store every entry of a bundle (- = stdin)",
       "Verifies every record of a bundle (checksum, and MAC when a secret is configured) and\n"
       "stores the good ones; - reads stdin. Exit status 1 if any record was rejected or the\n"
       "bundle is truncated.",
       {},
       1,
       1,
       Opens::storing,
       cmd_import},
      {"run",
       "[--preload] [-- COMMAND [ARGS...]]",
       "run a command with the drop-in NVRTC, nvJitLink and libNVVM: its JIT work is cached",
       "Runs COMMAND with progcache's drop-in libnvrtc, libnvJitLink and libnvvm first on\n"
       "LD_LIBRARY_PATH, so a program linked with them, or one that dlopens them, compiles and\n"
       "links through the cache with no change to its code: a hit answers every call from the\n"
       "cache without loading the real library; a miss runs the real one and stores every\n"
       "output. --cache sets the cache for COMMAND (PCACHE_URI). PCACHE_DISABLE=1 turns caching\n"
       "off. A cache that cannot be used is an error (exit 2) and COMMAND is not run. SIGTERM,\n"
       "SIGHUP, SIGUSR1 and SIGUSR2 are passed on to COMMAND. When COMMAND ends, says on stderr\n"
       "how many of its own compiles hit, missed or were not cached, or that none reached the\n"
       "cache. Exit status: COMMAND's (killed\n"
       "by a signal: the same signal), 127 if it cannot be found, 126 if it cannot be run. See\n"
       "docs/transparent.md.",
       {{"preload", 0, nullptr,
         "also LD_PRELOAD the drop-ins, for programs that look for an already loaded library\n"
         "before loading one by path (cuda-pathfinder: cuda-python, numba-cuda)"}},
       0,
       0,
       Opens::nothing,
       cmd_run},
      {"version",
       "",
       "print the version",
       "Prints the version of the command and of the library.",
       {},
       0,
       0,
       Opens::nothing,
       cmd_version},
      {"help",
       "[COMMAND] | --man",
       "show help for progcache or one command",
       "Without COMMAND, the overview; with one, that command's help (as COMMAND --help).\n"
       "--man prints the manual page (roff), generated from the same table.",
       {{"man", 0, nullptr, "print the manual page in roff"}},
       0,
       1,
       Opens::nothing,
       cmd_help},
  };
}

}  // namespace

const std::vector<Command> &commands() {
  static const std::vector<Command> table = make_commands();
  return table;
}

const Command *find_command(std::string_view name) {
  for (const Command &c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

const std::vector<OptionSpec> &global_options() {
  static const std::vector<OptionSpec> options = {
      {"cache", 0, "URI", "the cache to use (see CACHE below); before or after the command"},
      {"max-size", 0, "SIZE",
       "size cap for commands that store (500M, 4G); a command that only reads never evicts"},
      {"help", 'h', nullptr, "show help (of the command, when one is given)"},
  };
  return options;
}

}  // namespace progcache::cli
