// The ELF reader identifies NVRTC from files on disk before any is loaded: a truncated download,
// a flipped bit or a hostile file where libnvrtc is looked for must never crash it or make it
// read outside the file, and what it reports is well formed (a build-id is lower-case hex).
// Each input is the whole file, in memory (memfd), read both ways the library reads one.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "cuda/elf_file.hpp"

using namespace progcache;

namespace {

bool is_hex(const std::string &s) {
  if (s.size() % 2) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const int fd = ::memfd_create("fuzz-elf", MFD_CLOEXEC);
  if (fd < 0) __builtin_trap();
  if (size && ::write(fd, data, size) != ssize_t(size)) __builtin_trap();
  if (const std::optional<ElfFacts> facts = read_elf_facts(fd)) {
    if (!is_hex(facts->build_id)) __builtin_trap();
    for (const std::string &dir : facts->runpath)
      if (dir.empty() || dir.find(':') != std::string::npos) __builtin_trap();
    for (const std::string &dir : facts->rpath)
      if (dir.empty() || dir.find(':') != std::string::npos) __builtin_trap();
  }
  constexpr std::string_view kPrefix = "libnvrtc-builtins.so.";
  if (const std::optional<std::string> name = find_rodata_soname(fd, kPrefix)) {
    if (name->compare(0, kPrefix.size(), kPrefix) != 0 || name->size() == kPrefix.size() ||
        name->back() == '.' ||
        name->find_first_not_of("0123456789.", kPrefix.size()) != std::string::npos)
      __builtin_trap();
  }
  ::close(fd);
  return 0;
}
