// progcache compile FILE and progcache link INPUT...: through the cache, say hit or miss and what
// it cost.
#include <cstdio>
#include <memory>

#include "commands.hpp"
#include "program.hpp"

namespace progcache::cli {
namespace {

struct FreeCompiled {
  void operator()(pcache_compiled *r) const { pcache_compiled_free(r); }
};
using Compiled = std::unique_ptr<pcache_compiled, FreeCompiled>;

// Where the report goes: standard output, unless the binary goes there (-o -), which then holds
// the binary and nothing else, as get's does.
FILE *report_stream(const Invocation &in) {
  return in.has("output") && in.value("output") == "-" ? stderr : stdout;
}

// What compile and link print: the library's log on stderr (replayed from the stored log on a
// hit, so that a hit shows what the compile that made it showed), hit or miss and the time, the
// binary's size and key; and the binary in --output.
void report(const Invocation &in, pcache_status status, const Compiled &result,
            const std::string &what, const char *library, const char *verb,
            const std::string &kind) {
  const std::string log = result ? pcache_compiled_log(result.get()) : "";
  if (status == PCACHE_ERR_COMPILE && result) {
    std::fputs(log.c_str(), stderr);
    throw Failure(status, std::string(library) + " refused " + what + " (log above)");
  }
  check(status);
  if (!log.empty()) {
    std::fputs(log.c_str(), stderr);
    if (log.back() != '\n') std::fputc('\n', stderr);
  }
  const pcache_compiled *r = result.get();
  FILE *say = report_stream(in);
  const std::string took = milliseconds(pcache_compiled_elapsed_us(r));
  const std::string made_by =
      std::string(library) + " " + nvrtc_text(pcache_compiled_nvrtc_version(r));
  const std::string not_stored = pcache_admin_compiled_not_stored(r);
  // Two figures, each said for what it is: this call end to end, and the library's own run (the
  // same on a miss and on every later hit, which is what a hit saves).
  const std::string library_took = milliseconds(pcache_compiled_compile_us(r));
  if (pcache_compiled_from_cache(r))
    std::fprintf(say, "hit:  %s in %s (%s took %s when it was %s)\n", what.c_str(), took.c_str(),
                 made_by.c_str(), library_took.c_str(), verb);
  else if (not_stored.empty())
    std::fprintf(say, "miss: %s %s in %s, %s of it in %s; stored\n", what.c_str(), verb,
                 took.c_str(), library_took.c_str(), made_by.c_str());
  else
    std::fprintf(say, "miss: %s %s in %s, %s of it in %s; not stored: %s\n", what.c_str(), verb,
                 took.c_str(), library_took.c_str(), made_by.c_str(), not_stored.c_str());
  size_t size = 0;
  const void *code = pcache_compiled_data(r, &size);
  std::fprintf(say, "      %zu-byte %s, key %s\n", size, kind.c_str(),
               to_hex(pcache_compiled_key(r), PCACHE_KEY_SIZE).c_str());
  if (in.has("output")) write_file(in.value("output"), code, size);
}

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int32_t input_kind(const std::string &file) {
  static const std::pair<const char *, int32_t> kKinds[] = {
      {".cubin", PCACHE_INPUT_CUBIN},   {".ptx", PCACHE_INPUT_PTX},  {".ltoir", PCACHE_INPUT_LTOIR},
      {".fatbin", PCACHE_INPUT_FATBIN}, {".o", PCACHE_INPUT_OBJECT}, {".a", PCACHE_INPUT_LIBRARY}};
  for (const auto &[suffix, kind] : kKinds)
    if (ends_with(file, suffix)) return kind;
  throw Usage("'" + file +
              "': name the input's kind by its extension (.cubin .ptx .ltoir .fatbin "
              ".o .a)");
}

}  // namespace

int cmd_compile(Invocation &in) {
  const Program program(in);
  pcache_compiled *raw = nullptr;
  const pcache_status status = pcache_compile(in.cache, &program.get(), &raw);
  const Compiled result(raw);
  report(in, status, result, program.file(), program.library(), "compiled", program.target_name());
  for (const std::string &e : program.name_expressions())
    if (const char *lowered = pcache_compiled_lowered_name(result.get(), e.c_str()))
      std::fprintf(report_stream(in), "      %s -> %s\n", e.c_str(), lowered);
  return 0;
}

int cmd_link(Invocation &in) {
  std::vector<std::string> bytes;
  for (const std::string &file : in.args) bytes.push_back(read_file(file));
  std::vector<pcache_link_input> inputs(in.args.size());
  for (size_t i = 0; i < in.args.size(); ++i) {
    inputs[i].struct_size = sizeof inputs[i];
    inputs[i].kind = input_kind(in.args[i]);
    inputs[i].name = in.args[i].c_str();
    inputs[i].data = bytes[i].data();
    inputs[i].size = bytes[i].size();
  }
  const std::string target = in.value("target", "cubin");
  if (target != "cubin" && target != "ptx") throw Usage("--target must be cubin or ptx");
  std::vector<std::string> options;
  bool names_arch = false;
  for (const std::string &o : in.passthrough) names_arch |= o.compare(0, 5, "-arch") == 0;
  if (in.has("arch") || !names_arch) options.push_back("-arch=" + in.value("arch", "sm_90"));
  if (in.has("lto")) options.push_back("-lto");
  options.insert(options.end(), in.passthrough.begin(), in.passthrough.end());
  std::vector<const char *> pointers;
  for (const std::string &o : options) pointers.push_back(o.c_str());
  pcache_link_job job;
  check(pcache_link_job_init(&job, sizeof job));
  job.target = target == "ptx" ? PCACHE_TARGET_PTX : PCACHE_TARGET_CUBIN;
  job.options = pointers.data();
  job.num_options = pointers.size();
  job.inputs = inputs.data();
  job.num_inputs = inputs.size();
  pcache_compiled *raw = nullptr;
  const pcache_status status = pcache_link(in.cache, &job, &raw);
  const std::string what =
      in.args.size() == 1 ? in.args[0]
                          : in.args[0] + " and " + std::to_string(in.args.size() - 1) + " more";
  report(in, status, Compiled(raw), what, "nvJitLink", "linked", target);
  return 0;
}

}  // namespace progcache::cli
