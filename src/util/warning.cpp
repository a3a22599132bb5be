#include "util/warning.hpp"

#include <utility>

namespace progcache {
namespace {

thread_local ThreadMessages t_messages;

}  // namespace

ThreadMessages &thread_messages() {
  return t_messages;
}

void set_thread_warning(std::string message) {
  t_messages.warning = std::move(message);
}

}  // namespace progcache
