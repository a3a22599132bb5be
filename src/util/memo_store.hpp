// Where memos live: small records a cache keeps beside its entries (the header memo, the NVRTC
// identity memo), never counted, listed, exported or cleared as entries.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace progcache {

class MemoStore {
 public:
  virtual ~MemoStore() = default;
  // The value stored under name, or nullopt (absent, damaged or forged: a memo is only a hint
  // that saves work, so every failure reads as absent).
  virtual std::optional<std::string> load_memo(std::string_view name) = 0;
  // Stores value under name. Best effort: a failure is ignored (the work is redone next time).
  virtual void save_memo(std::string_view name, std::string_view value) = 0;
};

}  // namespace progcache
