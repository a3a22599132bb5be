// The exact NVRTC build that compiles: the GNU build-ids of libnvrtc and of the
// libnvrtc-builtins it loads. Read from the files on a hit (NVRTC is never loaded for a hit) and
// from the images mapped in the process once NVRTC is loaded (docs/keys.md).
#pragma once

#include <string>

#include "cuda/nvrtc.hpp"
#include "util/memo_store.hpp"

namespace progcache {

struct NvrtcIdentity {
  std::string nvrtc_build_id;     // hex
  std::string builtins_build_id;  // hex; "none" when no builtins library is found or loaded
  std::string builtins_path;      // where it is (or would be) loaded from; "" if none
  // The text the key hashes.
  std::string key_text() const { return nvrtc_build_id + "+" + builtins_build_id; }
  bool operator==(const NvrtcIdentity &o) const { return key_text() == o.key_text(); }
};

// The identity of the NVRTC at loc as a compile in this process would use it: the images this
// process has mapped where NVRTC is loaded (a library replaced on disk since is still the old
// image in memory), otherwise what the files say. The builtins library's name is read from
// libnvrtc itself and remembered in memos (keyed by build-id). Throws Error(cuda_unavailable)
// if libnvrtc cannot be read as an ELF file.
NvrtcIdentity current_nvrtc_identity(const NvrtcLocation &loc, MemoStore *memos);

}  // namespace progcache
