// A program made through the drop-in libNVVM. It records what nvvmAddModuleToProgram,
// nvvmLazyAddModuleToProgram and nvvmVerifyProgram are given and answers them as the real library
// did for the same calls (AcceptedCalls: a refusal is always the real library's);
// nvvmCompileProgram is looked up in the cache (keyed by every call's arguments in order, the
// options and the libNVVM build), and a hit answers the result and the log from the entry without
// loading the real library. On a miss, and for anything the cache cannot answer (a log asked for
// before the compile, a program compiled twice, NULL arguments), the calls go to a real program of
// the real library, made by replaying the recorded calls, so they answer as it does.
#pragma once

#include <nvvm.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/compile.hpp"
#include "dropin_common/support.hpp"

namespace progcache::dropin {

// The getter pairs a program answers, in payload order.
enum class NvvmOutput : int { result = 0, log = 1 };
inline constexpr int kNvvmOutputs = 2;

class DropinNvvm {
 public:
  static nvvmResult create(nvvmProgram *out);
  // The live drop-in program behind handle, or null (never created here, or destroyed).
  static DropinNvvm *find(nvvmProgram handle);
  static nvvmResult destroy(nvvmProgram *handle);

  nvvmResult add_module(bool lazy, const char *buffer, size_t size, const char *name);
  nvvmResult verify(int num_options, const char **options);
  nvvmResult compile(int num_options, const char **options);
  nvvmResult output_size(NvvmOutput which, size_t *size);
  nvvmResult output(NvvmOutput which, char *buffer);

  ~DropinNvvm();

 private:
  // recorded: the real library has not been needed; real: a real program mirrors every call and
  // answers; answered: the compile was answered from the cache, and so are the getters.
  enum class State { recorded, real, answered };
  enum class Op { add, lazy_add, verify };
  struct Call {
    Op op = Op::add;
    bool has_name = false;
    std::string name;                  // a module's
    InputBytes bytes;                  // a module's IR, or a verify's options as CallText
    std::vector<std::string> options;  // a verify's
    std::string key_name;
    // What keys and memos see of the bytes: their digest (each module is hashed once).
    std::string_view digest() const {
      return {reinterpret_cast<const char *>(bytes.digest.data()), bytes.digest.size()};
    }
  };

  explicit DropinNvvm(AcceptedCalls accepted) : accepted_(std::move(accepted)) {}
  nvvmResult ensure_real();
  void drop_real();
  // The call on the real program, after which the program is the real one's.
  template <class OnReal>
  nvvmResult forward(OnReal &&on_real);
  // A call that changes the program: answered from the memo of accepted calls, or by on_real.
  template <class OnReal>
  nvvmResult record(Call call, OnReal &&on_real);
  NvrtcOutput run_real(int num_options, const char **options);
  ProgramDesc describe(const std::vector<std::string> &options) const;
  const OutputSlot *answering_slot(NvvmOutput which) const;

  std::mutex mutex_;
  std::vector<Call> calls_;
  AcceptedCalls accepted_;
  nvvmProgram real_ = nullptr;
  bool forward_only_ = false;  // a call the drop-in does not model: the real program does it all
  bool compiled_ = false;
  std::vector<std::string> compile_options_;  // the answered compile's, replayed onto a real one
  State state_ = State::recorded;
  OutputSlot outputs_[kNvvmOutputs];
  // The real program's log after the last call, as remembered with it (numba-cuda asks for the
  // log after nvvmVerifyProgram): answered while no other call has been made.
  std::optional<OutputSlot> log_after_call_;
};

std::string encode_nvvm_outputs(const OutputSlot (&outputs)[kNvvmOutputs]);
bool decode_nvvm_outputs(ByteView payload, OutputSlot (&outputs)[kNvvmOutputs]);

}  // namespace progcache::dropin
