// A link made through the drop-in nvJitLink. It records what nvJitLinkCreate, nvJitLinkAddData
// and nvJitLinkAddFile are given and answers them as the real library did for the same calls
// (AcceptedCalls: a refusal is always the real library's); nvJitLinkComplete is looked up in the
// cache (the key pcache_link would derive, with every call's arguments), and a hit answers every
// getter from the entry without loading the real library. On a miss, and for anything the cache
// cannot answer (a getter before Complete, a link completed twice, NULL arguments), the calls go
// to a real link of the real library, made by replaying the recorded calls, so they answer as it
// does.
#pragma once

#include <nvJitLink.h>

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/compile.hpp"
#include "dropin_common/support.hpp"

namespace progcache::dropin {

// The getter pairs a link answers, in payload order.
enum class LinkOutput : int { cubin = 0, ptx = 1, error_log = 2, info_log = 3 };
inline constexpr int kLinkOutputs = 4;

class DropinLink {
 public:
  // One input as added: its type, name or path, and bytes.
  struct Input {
    nvJitLinkInputType type = NVJITLINK_INPUT_NONE;
    bool from_file = false;
    bool has_name = false;
    std::string name;  // AddData's name, or AddFile's path
    InputBytes data;   // the data, or the file's contents when it was added, and their digest
    std::string key_name;
  };

  static nvJitLinkResult create(nvJitLinkHandle *out, uint32_t num_options, const char **options);
  // The live drop-in link behind handle, or null (never created here, or destroyed).
  static DropinLink *find(nvJitLinkHandle handle);
  static nvJitLinkResult destroy(nvJitLinkHandle *handle);

  nvJitLinkResult add_data(nvJitLinkInputType type, const void *data, size_t size,
                           const char *name);
  nvJitLinkResult add_file(nvJitLinkInputType type, const char *file);
  nvJitLinkResult complete();
  nvJitLinkResult output_size(LinkOutput which, size_t *size);
  nvJitLinkResult output(LinkOutput which, void *buffer);

  ~DropinLink();

 private:
  // recorded: the real library has not been needed; real: a real link mirrors every call and
  // answers; answered: Complete was answered from the cache, and so are the getters.
  enum class State { recorded, real, answered };

  DropinLink(std::vector<std::string> options, AcceptedCalls accepted)
      : options_(std::move(options)), accepted_(std::move(accepted)) {}
  // The real link for this one: created and the recorded calls replayed (Complete too, for an
  // answered link), if need be.
  nvJitLinkResult ensure_real();
  void drop_real();
  // Adds an input: answered from the memo of accepted calls, or by on_real on the real link.
  template <class OnReal>
  nvJitLinkResult add(Input input, const CallText &call, OnReal &&on_real);
  NvrtcOutput run_real();
  // The call on the real link (made and caught up first), after which the link is the real
  // one's. The caller holds mutex_.
  template <class OnReal>
  nvJitLinkResult forward(OnReal &&on_real);
  ProgramDesc describe() const;

  std::mutex mutex_;
  std::vector<std::string> options_;
  std::vector<Input> inputs_;
  AcceptedCalls accepted_;
  nvJitLinkHandle real_ = nullptr;
  bool forward_only_ = false;  // a call the drop-in does not model: the real link does it all
  bool completed_ = false;
  State state_ = State::recorded;
  OutputSlot outputs_[kLinkOutputs];
};

// A link's getter answers as an entry's payload, and back (nullopt: not a payload this version
// wrote; the caller links instead).
std::string encode_link_outputs(const OutputSlot (&outputs)[kLinkOutputs]);
bool decode_link_outputs(ByteView payload, OutputSlot (&outputs)[kLinkOutputs]);

}  // namespace progcache::dropin
