// What progcache needs to know of a shared library without loading it: its GNU build-id, its
// run-time search path, and the strings it will dlopen; and the build-ids of the images a
// process has actually loaded. Used to identify the exact NVRTC build (docs/keys.md).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace progcache {

struct ElfFacts {
  std::string build_id;              // lower-case hex of NT_GNU_BUILD_ID; "" if none
  std::vector<std::string> runpath;  // DT_RUNPATH entries, unexpanded ("$ORIGIN", ...)
  std::vector<std::string> rpath;    // DT_RPATH entries (used only without DT_RUNPATH)
  bool progcache_front_end = false;  // has kFrontEndNoteType: not the real NVRTC
};

// The ELF note that marks a progcache front end of NVRTC's API (name "progcache"), so that no
// copy of the core ever takes it for the real NVRTC it sits in front of.
inline constexpr uint32_t kFrontEndNoteType = 0x50430001;

// Reads the facts of the ELF64 little-endian file open on fd. nullopt if it is not one, or is
// truncated or malformed (every offset is checked against the file size).
std::optional<ElfFacts> read_elf_facts(int fd);

// read_elf_facts of the regular file at path, remembered per path for this process with the stat
// identity it was read at (a stat per call; a file with another identity is read again), so that
// locating NVRTC and identifying it read its headers once. nullopt as read_elf_facts, or when the
// file cannot be opened. Thread-safe.
std::optional<ElfFacts> elf_facts_of_file(const std::string &path);

// The first library name in the file's .rodata section that starts with prefix and goes on with
// its version ("libnvrtc-builtins.so." -> "libnvrtc-builtins.so.13.0"), or nullopt. Reads the
// section in bounded chunks.
std::optional<std::string> find_rodata_soname(int fd, std::string_view prefix);

// A shared object mapped into this process.
struct LoadedImage {
  std::string path;      // as the dynamic loader names it
  std::string build_id;  // hex, "" if it has none
};

// Every object currently mapped (dl_iterate_phdr), in load order. Walked again only when the
// loader's counts of objects added and removed (dlpi_adds, dlpi_subs) have moved since the last
// walk: a Python process maps hundreds, and a drop-in asks on every call once it has loaded its
// real library. Thread-safe; the list is shared and never changes.
std::shared_ptr<const std::vector<LoadedImage>> loaded_images();

// Where dlopen(soname) called from a library with `caller` facts, living in caller_dir, would
// find the file: $LD_LIBRARY_PATH (when trusted), the caller's DT_RPATH/DT_RUNPATH with $ORIGIN
// expanded, /etc/ld.so.cache, then the default directories; "" if nowhere. Looks at files only.
std::string predict_dlopen_path(std::string_view soname, const ElfFacts &caller,
                                const std::string &caller_dir);

}  // namespace progcache
