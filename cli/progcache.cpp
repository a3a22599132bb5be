// progcache: the command-line tool over the cache (compile, stats, ls, get, put, rm, clear,
// prune, verify, evict, explain, export, import). Exit codes: 0 success, 1 the operation failed (or
// a get missed), 2 usage error. Errors go to stderr as one line.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "core/cache.hpp"
#include "core/compile.hpp"
#include "core/compiled_meta.hpp"
#include "core/key.hpp"
#include "format/entry.hpp"
#include "util/error.hpp"
#include "util/uri.hpp"

using namespace progcache;
using progcache::cli::human_size;
using progcache::cli::json_string;

namespace {

constexpr const char *kUsage =
    "usage: progcache [--cache URI] [--max-size SIZE] <command> [args]\n"
    "\n"
    "commands:\n"
    "  compile FILE.cu [--arch sm_90] [--target cubin|ptx|ltoir] [-o OUT]\n"
    "                  [--name-expression EXPR]... [-- NVRTC options...]\n"
    "                            compile through the cache; prints hit or miss and the time\n"
    "  deps FILE.cu [same options as compile]\n"
    "                            list the header paths the key covers (found or absent)\n"
    "  explain FILE.cu [same options as compile]\n"
    "                            say why it would miss: which key field differs from the\n"
    "                            closest stored entry of the same program name\n"
    "  stats                     entries, size, cap and the counters shared by all processes\n"
    "  ls                        key, size, target and last use of every entry\n"
    "  get KEY -o FILE           write an entry's bytes to FILE (KEY: hex, or text:STRING)\n"
    "  put KEY FILE              store FILE's bytes under KEY\n"
    "  rm KEY                    remove an entry\n"
    "  clear                     remove every entry\n"
    "  prune --max-size SIZE     evict least-recently-used entries down to SIZE (500M, 10G)\n"
    "  verify                    read every entry; report and remove damaged ones\n"
    "  evict --older-than AGE    remove entries unused for AGE (30d, 12h)\n"
    "  evict --nvrtc-version V   remove entries compiled by NVRTC V (e.g. 12.4)\n"
    "  export FILE               write every entry to one bundle file (- = stdout)\n"
    "  import FILE               verify and store every entry of a bundle (- = stdin)\n"
    "  version                   print the version\n"
    "\n"
    "The cache is --cache URI (before or after the command), else $PCACHE_URI, else\n"
    "sqlite:$PCACHE_DIR/cache.db, else $XDG_CACHE_HOME/progcache/cache.db, else\n"
    "~/.cache/progcache/cache.db. URIs: memory:, sqlite:PATH, filestream:DIR,\n"
    "redis://HOST:PORT[/DB], tiered:URI|URI|... (see docs/backends.md).\n"
    "\n"
    "environment:\n"
    "  PCACHE_URI, PCACHE_DIR    where the default cache lives (see above)\n"
    "  PCACHE_MAX_SIZE           default size cap, e.g. 4G (0 or unset: unbounded)\n"
    "  PCACHE_DISABLE=1          compile always, store nothing\n"
    "  PCACHE_NVRTC_LIBRARY      the libnvrtc to use (default: newest libnvrtc.so.N found)\n"
    "  PCACHE_LIBCUDA            the CUDA driver library (default: libcuda.so.1)\n"
    "\n"
    "exit status: 0 success, 1 failure (or a get that missed), 2 usage error.\n"
    "Run 'progcache COMMAND --help' for one command.\n";

const std::map<std::string, std::string> kCommandHelp = {
    {"compile",
     "usage: progcache compile FILE.cu [--arch sm_XX] [--target cubin|ptx|ltoir] [-o OUT]\n"
     "                         [--name-expression EXPR]... [-- NVRTC options...]\n"
     "Compiles FILE.cu with NVRTC through the cache. The program name is FILE as given, so\n"
     "quoted includes are found beside it; -I DIR and other NVRTC options go after --.\n"
     "--arch defaults to sm_90 for cubin targets when no -arch option is given.\n"
     "Prints 'hit' or 'miss', the time taken, the binary's size and key; -o writes the binary.\n"},
    {"deps",
     "usage: progcache deps FILE.cu [compile options]\n"
     "Lists what the key of FILE covers on disk, in the order NVRTC would look: 'present PATH'\n"
     "for each header read, 'absent PATH' for each place looked at that held nothing (creating\n"
     "a file there changes the key). Exit status 1 if the program cannot be cached, with why.\n"},
    {"explain",
     "usage: progcache explain FILE.cu [compile options]\n"
     "Derives FILE's key as compile would and, on a miss, names every key field that\n"
     "differs from the closest stored entry with the same program name.\n"},
    {"stats",
     "usage: progcache stats [--zero | --json]\nEntries, stored bytes, cap, and the "
     "hit/miss/eviction\n"
     "counters and compile time saved, shared by every process using the cache.\n"
     "--zero (-z) sets those counters to zero (like ccache -z); entries stay. clear removes\n"
     "entries and leaves the counters. --json prints one JSON object (docs/cli.md).\n"},
    {"ls",
     "usage: progcache ls [--json]\nOne line per entry: key, size, target, NVRTC, last use;\n"
     "--json prints one JSON object (docs/cli.md).\n"},
    {"get",
     "usage: progcache get KEY -o FILE\nKEY is hex (as ls prints it) or text:STRING; FILE -\n"
     "is standard output. Exit status 1 on a miss.\n"},
    {"put", "usage: progcache put KEY FILE\nFILE - is standard input.\n"},
    {"rm", "usage: progcache rm KEY\nExit status 1 if there was no such entry.\n"},
    {"clear", "usage: progcache clear\n"},
    {"prune",
     "usage: progcache prune --max-size SIZE\nEvicts least-recently-used entries until "
     "the stored payloads fit SIZE (500M, 10G, 1048576).\n"},
    {"verify",
     "usage: progcache verify\nReads and checks every entry; damaged ones are removed "
     "and reported.\nExit status 1 when damage was found (and removed), like fsck.\n"},
    {"evict",
     "usage: progcache evict --older-than AGE | --nvrtc-version V\n"
     "AGE: 30d, 12h, 15m, 45s. V: an NVRTC version such as 12.4 or 13.0.\n"},
    {"export",
     "usage: progcache export FILE\nWrites every entry (payload and metadata, verified, "
     "compressed, signed\nwhen a secret is configured) to one portable bundle; - writes to "
     "stdout.\n"},
    {"import",
     "usage: progcache import FILE\nVerifies every record of a bundle (checksum, and MAC when a "
     "secret is\nconfigured) and stores the good ones; - reads stdin. Exit status 1 if any\n"
     "record was rejected or the bundle is truncated.\n"},
    {"version", "usage: progcache version\n"},
};

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string ms(uint64_t us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", double(us) / 1000.0);
  return buf;
}

std::string nvrtc_text(uint32_t v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

bool printable(const std::string &k) {
  for (unsigned char c : k)
    if (c < 0x20 || c > 0x7e) return false;
  return !k.empty();
}

std::string show_key(const std::string &k) {
  return printable(k) ? "text:" + k : to_hex(k);
}

std::string parse_key(const std::string &text) {
  if (text.rfind("text:", 0) == 0) return text.substr(5);
  if (text.size() % 2 || text.empty() ||
      text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    throw Usage("KEY '" + text + "' is neither hex nor text:STRING");
  std::string out;
  for (size_t i = 0; i < text.size(); i += 2)
    out.push_back(char(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

// "-" is standard input.
std::string read_file(const std::string &path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    if (std::cin.bad()) throw Error(Status::io, "cannot read standard input");
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Status::io, "cannot read '" + path + "': " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "-" is standard output.
void write_file(const std::string &path, ByteView data) {
  if (path == "-") {
    if (std::fwrite(data.data, 1, data.size, stdout) != data.size || std::fflush(stdout) != 0)
      throw Error(Status::io, std::string("cannot write standard output: ") + std::strerror(errno));
    return;
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(data.data), std::streamsize(data.size));
  if (!out) throw Error(Status::io, "cannot write '" + path + "': " + std::strerror(errno));
}

struct CompileArgs {
  std::string file, out;
  std::string arch, target = "cubin";
  std::vector<std::string> exprs, nvrtc_options;
};

CompileArgs parse_compile_args(const std::vector<std::string> &args) {
  CompileArgs c;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw Usage(a + " needs a value");
      return args[++i];
    };
    if (a == "--") {
      c.nvrtc_options.assign(args.begin() + long(i) + 1, args.end());
      break;
    } else if (a == "--arch") {
      c.arch = value();
    } else if (a == "--target") {
      c.target = value();
    } else if (a == "-o") {
      c.out = value();
    } else if (a == "--name-expression") {
      c.exprs.push_back(value());
    } else if (!a.empty() && a[0] == '-') {
      throw Usage("unknown option '" + a + "' (NVRTC options go after --)");
    } else if (c.file.empty()) {
      c.file = a;
    } else {
      throw Usage("unexpected argument '" + a + "'");
    }
  }
  if (c.file.empty()) throw Usage("compile needs FILE.cu");
  if (c.target != "cubin" && c.target != "ptx" && c.target != "ltoir")
    throw Usage("--target must be cubin, ptx or ltoir");
  return c;
}

// The program as compile/explain see it; strings live in `storage`.
ProgramDesc make_program(const CompileArgs &c, std::vector<std::string> &storage,
                         std::string &source) {
  source = read_file(c.file);
  storage.clear();
  storage.reserve(c.nvrtc_options.size() + 2 + c.exprs.size());
  // Whether the options name an architecture, in any spelling NVRTC takes: the key's own option
  // table decides (-arch=sm_80, -arch sm_80, --gpu-architecture=..., -arch=native...).
  bool has_arch = false;
  const std::vector<std::string_view> given(c.nvrtc_options.begin(), c.nvrtc_options.end());
  for (const std::string &o : canonical_options(given, true))
    has_arch |= o.rfind("--gpu-architecture", 0) == 0;
  ProgramDesc p;
  // The file's path as given: NVRTC resolves its quoted includes against the path's directory,
  // as a compiler run on the file would.
  storage.push_back(c.file);
  p.name = storage.back();
  p.source = ByteView(source);
  p.target = c.target == "ptx" ? Target::ptx : c.target == "ltoir" ? Target::ltoir : Target::cubin;
  if (!c.arch.empty() || (!has_arch && p.target == Target::cubin)) {
    storage.push_back("-arch=" + (c.arch.empty() ? std::string("sm_90") : c.arch));
    p.options.push_back(storage.back());
  }
  for (const std::string &o : c.nvrtc_options) p.options.push_back(o);
  for (const std::string &e : c.exprs) p.name_expressions.push_back(e);
  return p;
}

int cmd_compile(Cache &cache, const std::vector<std::string> &args) {
  const CompileArgs c = parse_compile_args(args);
  std::vector<std::string> storage;
  std::string source;
  const ProgramDesc p = make_program(c, storage, source);
  auto r = compile_through_cache(&cache, p, {});
  if (r->status == Status::compile) {
    std::fprintf(stderr, "%s", r->meta.log.c_str());
    throw Error(Status::compile, "NVRTC could not compile " + c.file + " (log above)");
  }
  // NVRTC's warnings and ptxas output (-Xptxas -v), replayed from the stored log on a hit, so
  // that a hit shows what the compile that made it showed.
  if (!r->meta.log.empty()) {
    std::fputs(r->meta.log.c_str(), stderr);
    if (r->meta.log.back() != '\n') std::fputc('\n', stderr);
  }
  if (r->from_cache)
    std::printf("hit:  %s in %s (NVRTC %s took %s when it was compiled)\n", c.file.c_str(),
                ms(r->elapsed_us).c_str(), nvrtc_text(r->meta.nvrtc_version).c_str(),
                ms(r->meta.compile_us).c_str());
  else if (r->not_stored.empty())
    std::printf("miss: %s compiled in %s (NVRTC %s) and stored\n", c.file.c_str(),
                ms(r->elapsed_us).c_str(), nvrtc_text(r->meta.nvrtc_version).c_str());
  else
    std::printf("miss: %s compiled in %s (NVRTC %s), not stored: %s\n", c.file.c_str(),
                ms(r->elapsed_us).c_str(), nvrtc_text(r->meta.nvrtc_version).c_str(),
                r->not_stored.c_str());
  std::printf("      %zu-byte %s, key %s\n", r->code.size, c.target.c_str(),
              to_hex(ByteView(r->key.data(), r->key.size())).c_str());
  for (const auto &[e, s] : r->meta.lowered_names)
    std::printf("      %s -> %s\n", e.c_str(), s.c_str());
  if (!c.out.empty()) write_file(c.out, r->code);
  return 0;
}

std::string short_digest(const std::string &hex) {
  return hex.size() > 12 ? hex.substr(0, 12) + "..." : hex;
}

// One line per key field that differs, in words: headers by path, the NVRTC build by build-id.
void print_key_differences(const std::vector<std::pair<std::string, std::string>> &stored,
                           const std::vector<std::pair<std::string, std::string>> &current,
                           uint32_t stored_nvrtc) {
  std::map<std::string, std::string> have(stored.begin(), stored.end()),
      now(current.begin(), current.end());
  auto base_name = [](const std::string &path) { return path.substr(path.rfind('/') + 1); };
  for (const auto &[f, v] : now) {
    const auto old = have.find(f);
    if (old != have.end() && old->second == v) continue;
    if (f.rfind("file ", 0) == 0) {
      const std::string path = f.substr(5);
      if (old == have.end()) {
        std::printf("  header %s is read now (it was not then)\n", path.c_str());
      } else if (old->second == "absent") {
        std::string shadowed;
        for (const auto &[g, w] : have)
          if (g != f && g.rfind("file ", 0) == 0 && w != "absent" && base_name(g) == base_name(f))
            shadowed = g.substr(5);
        if (shadowed.empty())
          std::printf("  a new file %s now exists where the compile looked for a header\n",
                      path.c_str());
        else
          std::printf("  a new file %s now shadows %s\n", path.c_str(), shadowed.c_str());
      } else if (v == "absent") {
        std::printf("  header %s was removed\n", path.c_str());
      } else {
        std::printf("  header %s changed (digest %s -> %s)\n", path.c_str(),
                    short_digest(old->second).c_str(), short_digest(v).c_str());
      }
    } else if (f == "nvrtc_build" && old != have.end()) {
      std::printf("  NVRTC build %s -> %s (the entry was compiled by NVRTC %s)\n",
                  short_digest(old->second).c_str(), short_digest(v).c_str(),
                  nvrtc_text(stored_nvrtc).c_str());
    } else if (old == have.end()) {
      std::printf("  %-18s now %s (absent then)\n", f.c_str(), v.c_str());
    } else {
      std::printf("  %-18s stored %s, now %s\n", f.c_str(), old->second.c_str(), v.c_str());
    }
  }
  for (const auto &[f, v] : have) {
    if (now.count(f)) continue;
    if (f.rfind("file ", 0) == 0)
      std::printf("  header %s is no longer read\n", f.substr(5).c_str());
    else
      std::printf("  %-18s stored %s (absent now)\n", f.c_str(), v.c_str());
  }
}

int cmd_deps(Cache &cache, const std::vector<std::string> &args) {
  const CompileArgs c = parse_compile_args(args);
  std::vector<std::string> storage;
  std::string source;
  const ProgramDesc p = make_program(c, storage, source);
  const PreparedCompile prepared = prepare_compile(&cache, p);
  for (const HeaderDependency &d : prepared.context.dependencies)
    std::printf("%s %s\n", d.present ? "present" : "absent ", d.path.c_str());
  if (prepared.uncacheable.empty()) return 0;
  std::printf("uncacheable: %s\n", prepared.uncacheable.c_str());
  return 1;
}

int cmd_explain(Cache &cache, const std::vector<std::string> &args) {
  const CompileArgs c = parse_compile_args(args);
  std::vector<std::string> storage;
  std::string source;
  ProgramDesc p = make_program(c, storage, source);
  const PreparedCompile prepared = prepare_compile(&cache, p);
  const Key &key = prepared.key;
  const auto want = key_fields(p, &prepared.context);
  if (!prepared.uncacheable.empty()) {
    std::printf("uncacheable: %s is compiled every time and never stored: %s\n", c.file.c_str(),
                prepared.uncacheable.c_str());
    return 1;
  }
  if (cache.get(ByteView(key.data(), key.size()), Access::peek)) {
    std::printf("hit: %s is cached (key %s)\n", c.file.c_str(),
                to_hex(ByteView(key.data(), key.size())).c_str());
    return 0;
  }
  std::vector<std::pair<std::string, std::string>> best;
  size_t best_diff = SIZE_MAX, same_name = 0, total = 0;
  uint32_t best_nvrtc = 0;
  cache.list([&](const EntryInfo &e) {
    ++total;
    auto hit = cache.get(e.key, Access::peek);
    if (!hit) return;
    auto meta = decode_meta(hit->meta);
    if (!meta || meta->program_name != std::string(p.name)) return;
    ++same_name;
    std::map<std::string, std::string> have(meta->key_fields.begin(), meta->key_fields.end());
    std::map<std::string, std::string> now(want.begin(), want.end());
    size_t diff = 0;
    for (const auto &[f, v] : now) diff += have.count(f) == 0 || have[f] != v;
    for (const auto &[f, v] : have) diff += now.count(f) == 0;
    if (diff < best_diff) {
      best_diff = diff;
      best = meta->key_fields;
      best_nvrtc = meta->nvrtc_version;
    }
  });
  std::printf("miss: %s is not cached (key %s)\n", c.file.c_str(),
              to_hex(ByteView(key.data(), key.size())).c_str());
  if (same_name == 0) {
    std::printf("no stored entry has the program name '%s' (%zu entries of other programs)\n",
                std::string(p.name).c_str(), total);
    return 1;
  }
  std::printf("closest of %zu stored entries named '%s' differs in:\n", same_name,
              std::string(p.name).c_str());
  print_key_differences(best, want, best_nvrtc);
  return 1;
}

void print_tiers(Cache &cache) {
  // Each tier's own storage and shared counters (what every process using it recorded).
  const std::vector<Cache *> tiers = cache.tiers();
  for (size_t i = 0; i < tiers.size(); ++i) {
    std::printf("tier %zu:              %s\n", i, tiers[i]->display_uri().c_str());
    try {
      const PersistentCounters pc = tiers[i]->persistent_counters();
      std::printf("  entries %llu, size %s, hits %lld, misses %lld\n",
                  (unsigned long long)tiers[i]->count(), human_size(tiers[i]->size()).c_str(),
                  (long long)pc.hits, (long long)pc.misses);
    } catch (const Error &e) {
      std::printf("  unavailable: %s\n", e.what());
    }
  }
}

int cmd_stats(Cache &cache, uint64_t cap, bool json) {
  const auto tiers = cache.tiers();
  if (json) {
    std::string out = "{\"cache\": " + json_string(cache.display_uri());
    if (!tiers.empty()) {  // each tier keeps its own entries and counters
      out += ", \"tiers\": [";
      for (size_t i = 0; i < tiers.size(); ++i) {
        out += (i ? ", " : "") + std::string("{\"uri\": ") + json_string(tiers[i]->display_uri());
        try {
          const PersistentCounters pc = tiers[i]->persistent_counters();
          out += ", \"entries\": " + std::to_string(tiers[i]->count()) +
                 ", \"size_bytes\": " + std::to_string(tiers[i]->size()) +
                 ", \"hits\": " + std::to_string(pc.hits) +
                 ", \"misses\": " + std::to_string(pc.misses) + "}";
        } catch (const Error &e) {
          out += ", \"error\": " + json_string(e.what()) + "}";
        }
      }
      std::printf("%s]}\n", out.c_str());
      return 0;
    }
    const PersistentCounters pc = cache.persistent_counters();
    const uint64_t count = cache.count(), size = cache.size();
    const int64_t lookups = pc.hits + pc.misses;
    char ratios[160];
    std::snprintf(ratios, sizeof ratios, "\"fill_ratio\": %s, \"hit_rate\": %.4f",
                  cap ? std::to_string(double(size) / double(cap)).c_str() : "null",
                  lookups ? double(pc.hits) / double(lookups) : 0.0);
    out += ", \"entries\": " + std::to_string(count) + ", \"size_bytes\": " + std::to_string(size) +
           ", \"cap_bytes\": " + (cap ? std::to_string(cap) : "null") + ", " + ratios +
           ", \"hits\": " + std::to_string(pc.hits) + ", \"misses\": " + std::to_string(pc.misses) +
           ", \"evictions\": " + std::to_string(pc.evictions) +
           ", \"compile_us_saved\": " + std::to_string(pc.compile_us_saved) + "}";
    std::printf("%s\n", out.c_str());
    return 0;
  }
  if (!tiers.empty()) {  // each tier keeps its own entries and counters
    std::printf("cache:               %s\n", cache.display_uri().c_str());
    print_tiers(cache);
    return 0;
  }
  const PersistentCounters pc = cache.persistent_counters();
  const uint64_t count = cache.count(), size = cache.size();
  std::printf("cache:               %s\n", cache.display_uri().c_str());
  std::printf("entries:             %llu\n", (unsigned long long)count);
  std::printf("size:                %s\n", human_size(size).c_str());
  if (cap)
    std::printf("cap:                 %s (%.1f%% full)\n", human_size(cap).c_str(),
                100.0 * double(size) / double(cap));
  else
    std::printf("cap:                 none (set PCACHE_MAX_SIZE or --max-size)\n");
  std::printf("hits:                %lld\n", (long long)pc.hits);
  std::printf("misses:              %lld\n", (long long)pc.misses);
  const int64_t lookups = pc.hits + pc.misses;
  std::printf("hit rate:            %.1f%%\n",
              lookups ? 100.0 * double(pc.hits) / double(lookups) : 0.0);
  std::printf("evictions:           %lld\n", (long long)pc.evictions);
  std::printf("compile time saved:  %.1f s\n", double(pc.compile_us_saved) / 1e6);
  return 0;
}

int cmd_ls(Cache &cache, bool json) {
  size_t n = 0;
  if (json)
    std::printf("{\"entries\": [");
  else
    std::printf("%-66s %10s %-6s %-6s %s\n", "KEY", "SIZE", "TARGET", "NVRTC", "LAST USE");
  cache.list([&](const EntryInfo &e) {
    std::string target, nvrtc;
    if (auto hit = cache.get(e.key, Access::peek))
      if (auto meta = decode_meta(hit->meta)) {
        static const char *const kTargets[] = {"cubin", "ptx", "ltoir"};
        target = kTargets[meta->target % 3];
        nvrtc = nvrtc_text(meta->nvrtc_version);
      }
    if (json) {
      std::printf(
          "%s{\"key\": %s, \"size_bytes\": %llu, \"target\": %s, \"nvrtc\": %s, "
          "\"last_use\": %lld}",
          n ? ", " : "", json_string(show_key(e.key)).c_str(), (unsigned long long)e.payload_size,
          target.empty() ? "null" : json_string(target).c_str(),
          nvrtc.empty() ? "null" : json_string(nvrtc).c_str(), (long long)e.last_use);
    } else {
      char when[32] = "-";
      const time_t t = time_t(e.last_use);
      if (t) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
      std::printf("%-66s %10llu %-6s %-6s %s\n", show_key(e.key).c_str(),
                  (unsigned long long)e.payload_size, target.empty() ? "-" : target.c_str(),
                  nvrtc.empty() ? "-" : nvrtc.c_str(), when);
    }
    ++n;
  });
  if (json)
    std::printf("], \"count\": %zu}\n", n);
  else
    std::printf("%zu entries\n", n);
  return 0;
}

int cmd_verify(Cache &cache) {
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t corrupt_before = cache.stats().corrupt;
  size_t checked = 0, good = 0;
  cache.list([&](const EntryInfo &e) {
    ++checked;
    if (cache.get(e.key, Access::peek))
      ++good;
    else
      std::printf("removed damaged entry %s\n", show_key(e.key).c_str());
    if (checked % 1000 == 0)
      std::fprintf(stderr, "progcache: verify: %zu entries checked\n", checked);
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const uint64_t damaged = cache.stats().corrupt - corrupt_before;
  std::printf("verified %zu entries in %.2f s: %zu good, %llu damaged and removed\n", checked, secs,
              good, (unsigned long long)damaged);
  return damaged ? 1 : 0;  // like fsck: 1 says damage was found (and repaired)
}

int cmd_evict(Cache &cache, const std::vector<std::string> &args) {
  if (args.size() != 2 || (args[0] != "--older-than" && args[0] != "--nvrtc-version"))
    throw Usage("evict needs --older-than AGE or --nvrtc-version V");
  const auto t0 = std::chrono::steady_clock::now();
  std::function<bool(const EntryInfo &)> doomed;
  if (args[0] == "--older-than") {
    const int64_t cutoff =
        int64_t(std::time(nullptr)) - parse_duration_seconds("--older-than", args[1]);
    doomed = [cutoff](const EntryInfo &e) { return e.last_use < cutoff; };
  } else {
    const std::string v = args[1];
    const size_t dot = v.find('.');
    auto number = [](const std::string &s) {
      return !s.empty() && s.size() <= 4 && s.find_first_not_of("0123456789") == std::string::npos;
    };
    if (dot == std::string::npos || !number(v.substr(0, dot)) || !number(v.substr(dot + 1)))
      throw Usage("--nvrtc-version wants MAJOR.MINOR, e.g. 12.4; got '" + v + "'");
    const uint32_t version =
        uint32_t(std::stoul(v.substr(0, dot)) * 1000 + std::stoul(v.substr(dot + 1)) * 10);
    doomed = [&cache, version](const EntryInfo &e) {
      auto hit = cache.get(e.key, Access::peek);
      auto meta = hit ? decode_meta(hit->meta) : std::nullopt;
      return meta && meta->nvrtc_version == version;
    };
  }
  size_t removed = 0;
  uint64_t bytes = 0;
  cache.list([&](const EntryInfo &e) {
    if (doomed(e) && cache.remove(e.key)) {
      ++removed;
      bytes += e.payload_size;
    }
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("evicted %zu entries (%s) in %.2f s\n", removed, human_size(bytes).c_str(), secs);
  return 0;
}

int run(int argc, char **argv) {
  std::string uri;
  uint64_t max_size = default_max_size();
  bool max_size_set = false;
  std::vector<std::string> rest;
  std::string command;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {  // everything after belongs to the command (NVRTC options)
      for (; i < argc; ++i) rest.emplace_back(argv[i]);
      break;
    }
    if (a == "--cache" || a == "--max-size") {
      if (i + 1 >= argc) throw Usage(a + " needs a value");
      if (a == "--cache") {
        uri = argv[++i];
      } else {
        max_size = parse_size("--max-size", argv[++i]);
        max_size_set = true;
      }
    } else if (a.rfind("--cache=", 0) == 0) {
      uri = a.substr(8);
    } else if (command.empty() && (a == "--help" || a == "-h" || a == "help")) {
      std::printf("%s", kUsage);
      return 0;
    } else if (command.empty() && (a == "--version" || a == "version")) {
      command = "version";
    } else if (command.empty() && a[0] != '-') {
      command = a;
    } else {
      rest.push_back(a);
    }
  }
  if (command.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return 2;
  }
  for (const std::string &a : rest)
    if (a == "--help" || a == "-h") {
      auto it = kCommandHelp.find(command);
      if (it == kCommandHelp.end()) throw Usage("unknown command '" + command + "'");
      std::printf("%s", it->second.c_str());
      return 0;
    } else if (a == "--") {
      break;
    }
  if (command == "version") {
    std::printf("progcache %s\n", PCACHE_CLI_VERSION);
    return 0;
  }
  if (!kCommandHelp.count(command))
    throw Usage("unknown command '" + command + "' (see progcache --help)");
  if (command == "prune") {
    if (rest.size() != 0 && !(rest.size() == 0)) throw Usage("prune takes only --max-size SIZE");
    if (!max_size_set) throw Usage("prune needs --max-size SIZE");
    const std::string scheme = parse_uri(uri.empty() ? default_uri() : uri).scheme;
    if (scheme == "redis" || scheme == "tiered")
      throw Usage("prune: a " + scheme +
                  ": cache is not pruned by progcache (Redis evicts by its maxmemory policy; "
                  "prune each local tier by its own URI)");
  }
  // Only commands that store apply the cap (and so may evict when it is smaller than what is
  // stored): `progcache --max-size 1K stats` used to evict every entry.
  static const std::set<std::string> kStoring = {"compile", "put", "import", "prune"};
  CacheOptions options;
  options.max_size_bytes = kStoring.count(command) ? max_size : 0;
  const auto t0 = std::chrono::steady_clock::now();
  auto cache = Cache::open(uri, options);  // prune: opening with the smaller cap evicts down to it
  auto need = [&](size_t n) {
    if (rest.size() != n)
      throw Usage(command + " takes " + std::to_string(n) + " argument(s); see progcache " +
                  command + " --help");
  };
  if (command == "compile") return cmd_compile(*cache, rest);
  if (command == "explain") return cmd_explain(*cache, rest);
  if (command == "deps") return cmd_deps(*cache, rest);
  if (command == "stats" && rest.size() == 1 && (rest[0] == "--zero" || rest[0] == "-z")) {
    cache->zero_counters();
    std::printf("statistics zeroed (%llu entries kept)\n", (unsigned long long)cache->count());
    return 0;
  }
  const bool json = rest.size() == 1 && rest[0] == "--json";
  if (command == "stats") return need(json ? 1 : 0), cmd_stats(*cache, max_size, json);
  if (command == "ls") return need(json ? 1 : 0), cmd_ls(*cache, json);
  if (command == "verify") return need(0), cmd_verify(*cache);
  if (command == "evict") return cmd_evict(*cache, rest);
  if (command == "export") return need(1), cli::cmd_export(*cache, rest[0]);
  if (command == "import") return need(1), cli::cmd_import(*cache, rest[0]);
  if (command == "clear") {
    need(0);
    const uint64_t n = cache->count();
    cache->clear();
    std::printf("cleared %llu entries\n", (unsigned long long)n);
    return 0;
  }
  if (command == "prune") {
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("pruned to %s (cap %s): %llu entries left, %llu evicted, %.2f s\n",
                human_size(cache->size()).c_str(), human_size(max_size).c_str(),
                (unsigned long long)cache->count(), (unsigned long long)cache->stats().evictions,
                secs);
    return 0;
  }
  if (command == "get") {
    if (rest.size() != 3 || rest[1] != "-o") throw Usage("usage: progcache get KEY -o FILE");
    auto hit = cache->get(parse_key(rest[0]));
    if (!hit) {
      std::fprintf(stderr, "progcache: get: no entry %s\n", rest[0].c_str());
      return 1;
    }
    write_file(rest[2], hit->payload);
    if (rest[2] != "-")  // standard output holds the bytes and nothing else
      std::printf("wrote %zu bytes to %s\n", hit->payload.size, rest[2].c_str());
    return 0;
  }
  if (command == "put") {
    need(2);
    const std::string data = read_file(rest[1]);
    cache->put(parse_key(rest[0]), data);
    std::printf("stored %zu bytes under %s\n", data.size(), rest[0].c_str());
    return 0;
  }
  if (command == "rm") {
    need(1);
    if (!cache->remove(parse_key(rest[0]))) {
      std::fprintf(stderr, "progcache: rm: no entry %s\n", rest[0].c_str());
      return 1;
    }
    std::printf("removed %s\n", rest[0].c_str());
    return 0;
  }
  throw Usage("unknown command '" + command + "'");
}

}  // namespace

int main(int argc, char **argv) {
  try {
    const int rc = run(argc, argv);
    // What the library did without failing (a damaged entry removed, a database reset): the
    // C API reports it in pcache_last_error(); the command says it on stderr.
    if (const std::string warning = take_thread_warning(); !warning.empty())
      std::fprintf(stderr, "progcache: warning: %s\n", warning.c_str());
    return rc;
  } catch (const Usage &e) {
    std::fprintf(stderr, "progcache: %s\n", e.what());
    return 2;
  } catch (const Error &e) {
    std::string msg = e.what();
    for (char &c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "progcache: %s\n", msg.c_str());
    return e.status() == Status::invalid_arg ? 2 : 1;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "progcache: internal error: %s\n", e.what());
    return 1;
  }
}
