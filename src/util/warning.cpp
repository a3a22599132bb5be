#include "util/warning.hpp"

#include <utility>

namespace progcache {
namespace {

thread_local std::string t_warning;

}  // namespace

void set_thread_warning(std::string message) {
  t_warning = std::move(message);
}

std::string take_thread_warning() {
  return std::exchange(t_warning, std::string());
}

}  // namespace progcache
