// A program created through the drop-in NVRTC. It records what nvrtcCreateProgram,
// nvrtcAddNameExpression and nvrtcCompileProgram are given; a program's first compile is looked
// up in the cache (the key pcache_compile would derive), and a hit (a success or a failure NVRTC
// gives every time) answers every getter from the entry. On a miss, and for anything the cache
// cannot answer (a program compiled again, a flow callback, PCH), the calls go to a real program
// of the real NVRTC, made by replaying the recorded calls, so they answer as it does.
#pragma once

#include <nvrtc.h>

#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/compile.hpp"
#include "outputs.hpp"

namespace progcache::dropin {

// The cache the drop-in NVRTC's compiles go through (dropin_common/support.hpp).
inline Cache *dropin_cache() {
  return dropin_cache("NVRTC");
}

class DropinProgram {
 public:
  // nvrtcCreateProgram: validated as NVRTC validates; input the drop-in does not model (a NULL
  // header name, say) is handed to the real NVRTC, which decides.
  static nvrtcResult create(nvrtcProgram *out, const char *source, const char *name,
                            int num_headers, const char *const *headers,
                            const char *const *include_names);
  // Wraps a program the real NVRTC created (__nvrtcCPEx): every call is forwarded.
  static nvrtcResult adopt_real(nvrtcProgram *out, nvrtcProgram real);
  // The live drop-in program behind handle, or null (never created here, or destroyed).
  static DropinProgram *find(nvrtcProgram handle);
  static nvrtcResult destroy(nvrtcProgram *handle);

  nvrtcResult add_name_expression(const char *expression);
  nvrtcResult compile(int num_options, const char *const *options);
  nvrtcResult output_size(OutputKind kind, size_t *size);
  nvrtcResult output(OutputKind kind, char *buffer);
  nvrtcResult log_size(size_t *size);
  nvrtcResult log(char *buffer);
  nvrtcResult lowered_name(const char *expression, const char **lowered);
  nvrtcResult set_flow_callback(int (*callback)(void *, void *), void *payload);
  nvrtcResult pch_create_status();
  nvrtcResult pch_heap_size_required(size_t *size);

  ~DropinProgram();

 private:
  // recorded: not compiled yet; answered: the getters answer from outputs_ (a hit, or a stored
  // miss; failed_ for a refusal); real: the real program answers (uncached or forwarded calls).
  enum class State { recorded, answered, real };

  // A call that changed the program, replayed in order onto a real program made later.
  struct Call {
    bool compile = false;
    std::string expression;            // nvrtcAddNameExpression
    std::vector<std::string> options;  // nvrtcCompileProgram
  };

  DropinProgram() = default;
  // The real program for this one: created, and the recorded calls replayed, if need be.
  nvrtcResult ensure_real();
  void drop_real();
  // A miss: compiles with the real NVRTC and collects every output (CompileOptions::runner).
  NvrtcOutput run_real(int num_options, const char *const *options);
  // The compile on the real program, as it stands after the recorded calls (nothing cached).
  nvrtcResult compile_on_real(int num_options, const char *const *options);
  ProgramDesc describe(const std::vector<std::string> &options) const;

  std::mutex mutex_;
  std::string source_;
  bool has_name_ = false;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> headers_;  // include name -> source
  std::vector<std::string> name_expressions_;
  std::vector<Call> calls_;  // since creation, for replaying onto a real program
  nvrtcProgram real_ = nullptr;
  bool forward_only_ = false;  // a flow callback or __nvrtcCPEx: the real program does it all
  bool compiled_ = false;      // nvrtcCompileProgram has been called
  bool failed_ = false;        // answered: a stored refusal (nvrtcResult in refusal_)
  nvrtcResult refusal_ = NVRTC_SUCCESS;
  State state_ = State::recorded;
  CompileOutputs outputs_;
  std::string log_;
  std::vector<std::pair<std::string, std::string>> lowered_;
};

}  // namespace progcache::dropin
