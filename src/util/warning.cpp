#include "util/warning.hpp"

#include <utility>

#include "util/thread_state.hpp"

namespace progcache {

void set_thread_warning(std::string message) {
  thread_messages().warning = nul_shown(std::move(message));
}

}  // namespace progcache
