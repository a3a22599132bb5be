#include "cuda/elf_file.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/hex.hpp"
#include "util/stat_identity.hpp"
#include "util/trust.hpp"

namespace progcache {
namespace {

// Reads [offset, offset + size) of a file of file_size bytes; false if it lies outside.
bool read_range(int fd, uint64_t file_size, uint64_t offset, void *out, uint64_t size) {
  if (offset > file_size || size > file_size - offset) return false;
  return pread_all(fd, out, size, off_t(offset));
}

// The notes in [p, p + n) into facts: the first NT_GNU_BUILD_ID (as hex), and the front-end mark.
void read_notes(const uint8_t *p, size_t n, ElfFacts &facts) {
  size_t at = 0;
  while (n - at >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr h;
    std::memcpy(&h, p + at, sizeof h);
    at += sizeof h;
    const size_t name_len = (size_t(h.n_namesz) + 3) & ~size_t(3);
    const size_t desc_len = (size_t(h.n_descsz) + 3) & ~size_t(3);
    if (name_len > n - at || desc_len > n - at - name_len) return;
    const bool gnu = h.n_namesz == 4 && std::memcmp(p + at, "GNU", 4) == 0;
    if (gnu && h.n_type == NT_GNU_BUILD_ID && h.n_descsz > 0 && facts.build_id.empty())
      facts.build_id = to_hex(ByteView(p + at + name_len, h.n_descsz));
    if (h.n_namesz == 10 && std::memcmp(p + at, "progcache", 10) == 0 &&
        h.n_type == kFrontEndNoteType)
      facts.progcache_front_end = true;
    at += name_len + desc_len;
  }
}

std::string build_id_in_notes(const uint8_t *p, size_t n) {
  ElfFacts facts;
  read_notes(p, n, facts);
  return facts.build_id;
}

std::vector<std::string> split_path_list(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t colon = s.find(':', start);
    if (colon == std::string_view::npos) colon = s.size();
    if (colon > start) out.emplace_back(s.substr(start, colon - start));
    start = colon + 1;
  }
  return out;
}

bool is_regular_file(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// What a file's content gives, remembered for the process by the file's path and a tag with the
// stat identity it was read at (util/stat_identity.hpp), so that a file seen again costs a stat
// and no open. A regular file only; nothing is kept for a file changed under 2 s ago, nor when
// derive (given the open file and its fstat) answers nullopt. Holds at most kMaxKept answers.
template <typename T>
class FileMemo {
 public:
  template <typename Derive>
  std::optional<T> get(const std::string &path, std::string_view tag, Derive &&derive) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    {
      std::lock_guard lock(mutex_);
      const auto it = kept_.find(std::pair<std::string_view, std::string_view>(path, tag));
      if (it != kept_.end() && it->second.id == StatIdentity::of(st)) return it->second.value;
    }
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    const StatIdentity id = StatIdentity::of(st);  // what is read: the file open now
    std::optional<T> value = derive(fd.get(), st);
    if (value && !id.is_racy()) {
      std::lock_guard lock(mutex_);
      if (kept_.size() >= kMaxKept) kept_.clear();
      kept_.insert_or_assign(std::pair<std::string, std::string>(path, tag), Kept{id, *value});
    }
    return value;
  }

 private:
  static constexpr size_t kMaxKept = 256;
  // By path and tag, the answer for the identity the file had when it was read (a file since
  // replaced is read again, and its answer replaces the old one). Looked up without making a
  // string: formatting the identity into the key was a twentieth of a drop-in hit.
  struct Kept {
    StatIdentity id;
    T value;
  };
  struct PathTagLess {
    using is_transparent = void;
    template <typename A, typename B>
    bool operator()(const A &a, const B &b) const {
      return std::pair<std::string_view, std::string_view>(a.first, a.second) <
             std::pair<std::string_view, std::string_view>(b.first, b.second);
    }
  };
  ForkSafeMutex mutex_;
  std::map<std::pair<std::string, std::string>, Kept, PathTagLess> kept_;
};

// The path the loader's cache (ld.so.cache's bytes in data) gives for soname (the new
// "glibc-ld.so.cache1.1" format, alone or after an old-format table); "" if absent or of another
// format. Entries for glibc-hwcaps subdirectories are skipped (see docs/keys.md).
std::string ld_cache_entry(std::string_view data, std::string_view soname) {
  constexpr std::string_view kOld = "ld.so-1.7.0", kNew = "glibc-ld.so.cache1.1";
  size_t base = 0;
  if (data.compare(0, kOld.size(), kOld) == 0) {
    if (data.size() < kOld.size() + 4) return "";
    uint32_t nlibs;
    std::memcpy(&nlibs, data.data() + kOld.size(), 4);
    base = (kOld.size() + 4 + uint64_t(nlibs) * 12 + 7) & ~size_t(7);
  }
  constexpr size_t kHeader = 48, kEntry = 24;
  if (base > data.size() || data.size() - base < kHeader ||
      data.compare(base, kNew.size(), kNew) != 0)
    return "";
  uint32_t nlibs;
  std::memcpy(&nlibs, data.data() + base + 20, 4);
  if (uint64_t(nlibs) * kEntry > data.size() - base - kHeader) return "";
#if defined(__x86_64__)
  constexpr int32_t kArch = 0x0300;  // FLAG_X8664_LIB64
#elif defined(__aarch64__)
  constexpr int32_t kArch = 0x0a00;  // FLAG_AARCH64_LIB64
#else
  constexpr int32_t kArch = 0;
#endif
  auto string_at = [&](uint32_t off) -> std::string_view {
    if (base + off >= data.size()) return {};
    const char *s = data.data() + base + off;
    return std::string_view(s, strnlen(s, data.size() - base - off));
  };
  for (uint32_t i = 0; i < nlibs; ++i) {
    const char *e = data.data() + base + kHeader + size_t(i) * kEntry;
    int32_t flags;
    uint32_t key, value;
    uint64_t hwcap;
    std::memcpy(&flags, e, 4);
    std::memcpy(&key, e + 4, 4);
    std::memcpy(&value, e + 8, 4);
    std::memcpy(&hwcap, e + 16, 8);
    if ((flags & 0xff) != 3 /* FLAG_ELF_LIBC6 */ || (flags & 0xff00) != kArch || hwcap != 0)
      continue;
    if (string_at(key) == soname) return std::string(string_at(value));
  }
  return "";
}

// ld_cache_entry() of /etc/ld.so.cache; "" if it is absent or unreadable. Remembered (FileMemo:
// ldconfig replaces the file, so a new cache is another inode): a hit on the drop-in NVRTC checks
// where NVRTC would find its builtins, and reading and walking the 40 KB file for each of a
// process's compiles was a tenth of its time.
std::string ld_cache_lookup(std::string_view soname) {
  static FileMemo<std::string> memo;
  return memo
      .get("/etc/ld.so.cache", soname,
           [&](int fd, const struct stat &st) -> std::optional<std::string> {
             if (st.st_size <= 0 || st.st_size > (64 << 20)) return std::nullopt;
             // Mapped, as the loader maps it: a fresh process walks all 40 KB once, and reading
             // it into a new buffer cost ten page faults of zeroed memory and a copy. The file
             // is root's and ldconfig replaces it by rename, so it never shrinks under the map.
             const size_t size = size_t(st.st_size);
             void *map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
             if (map == MAP_FAILED) return std::nullopt;
             std::string entry = ld_cache_entry({static_cast<const char *>(map), size}, soname);
             ::munmap(map, size);
             return entry;
           })
      .value_or("");
}

// read_elf_facts of a file of size bytes (the caller's fstat).
std::optional<ElfFacts> elf_facts_of_size(int fd, uint64_t size) {
  Elf64_Ehdr eh;
  if (!read_range(fd, size, 0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 4096)
    return std::nullopt;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_range(fd, size, eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr)))
    return std::nullopt;
  ElfFacts facts;
  const Elf64_Phdr *dynamic = nullptr;
  for (const Elf64_Phdr &p : ph) {
    if (p.p_type == PT_DYNAMIC) dynamic = &p;
    if (p.p_type != PT_NOTE || p.p_filesz > (1 << 20)) continue;
    std::string notes(p.p_filesz, '\0');
    if (!read_range(fd, size, p.p_offset, notes.data(), notes.size())) return std::nullopt;
    read_notes(reinterpret_cast<const uint8_t *>(notes.data()), notes.size(), facts);
  }
  if (!dynamic || dynamic->p_filesz > (1 << 20)) return facts;
  std::vector<Elf64_Dyn> dyn(dynamic->p_filesz / sizeof(Elf64_Dyn));
  if (!read_range(fd, size, dynamic->p_offset, dyn.data(), dyn.size() * sizeof(Elf64_Dyn)))
    return std::nullopt;
  uint64_t strtab = 0;
  std::vector<std::pair<int64_t, uint64_t>> paths;  // (tag, string offset)
  for (const Elf64_Dyn &d : dyn) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_RUNPATH || d.d_tag == DT_RPATH) paths.emplace_back(d.d_tag, d.d_un.d_val);
  }
  uint64_t strtab_offset = UINT64_MAX;  // DT_STRTAB is an address: find the segment holding it
  for (const Elf64_Phdr &p : ph)
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr && strtab - p.p_vaddr < p.p_filesz)
      strtab_offset = strtab - p.p_vaddr + p.p_offset;
  if (strtab_offset == UINT64_MAX) return facts;
  for (const auto &[tag, off] : paths) {
    char buf[4096];
    const uint64_t at = strtab_offset + off;
    if (at >= size) return std::nullopt;
    const uint64_t n = std::min<uint64_t>(sizeof buf - 1, size - at);
    if (!read_range(fd, size, at, buf, n)) return std::nullopt;
    buf[n] = '\0';
    (tag == DT_RUNPATH ? facts.runpath : facts.rpath) = split_path_list(buf);
  }
  return facts;
}

}  // namespace

std::optional<ElfFacts> read_elf_facts(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return std::nullopt;
  return elf_facts_of_size(fd, uint64_t(st.st_size));
}

std::optional<ElfFacts> elf_facts_of_file(const std::string &path) {
  static FileMemo<ElfFacts> memo;
  return memo.get(path, "elf", [](int fd, const struct stat &st) {
    return elf_facts_of_size(fd, uint64_t(st.st_size));
  });
}

std::optional<std::string> find_rodata_soname(int fd, std::string_view prefix) {
  struct stat st;
  if (::fstat(fd, &st) != 0) return std::nullopt;
  const uint64_t size = uint64_t(st.st_size);
  Elf64_Ehdr eh;
  if (!read_range(fd, size, 0, &eh, sizeof eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
      eh.e_shnum == 0 || eh.e_shstrndx >= eh.e_shnum)
    return std::nullopt;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  if (!read_range(fd, size, eh.e_shoff, sh.data(), sh.size() * sizeof(Elf64_Shdr)))
    return std::nullopt;
  const Elf64_Shdr &names = sh[eh.e_shstrndx];
  for (const Elf64_Shdr &s : sh) {
    char name[8] = {};
    if (s.sh_type != SHT_PROGBITS || s.sh_name >= names.sh_size ||
        !read_range(fd, size, names.sh_offset + s.sh_name, name,
                    std::min<uint64_t>(8, size - names.sh_offset - s.sh_name)) ||
        std::strncmp(name, ".rodata", 8) != 0)
      continue;
    // Chunks overlap by a string's worth so a match split between two is still found.
    constexpr uint64_t kChunk = 1 << 20, kOverlap = 256;
    std::string buf;
    for (uint64_t at = 0; at < s.sh_size; at += kChunk) {
      const uint64_t n = std::min(kChunk + kOverlap, s.sh_size - at);
      buf.resize(n);
      if (!read_range(fd, size, s.sh_offset + at, buf.data(), n)) return std::nullopt;
      const size_t hit = buf.find(prefix);
      if (hit == std::string::npos || hit >= kChunk) continue;
      // The name is the prefix and its version ("...so.13.0"), wherever the string goes on
      // (NVRTC's messages quote it: "libnvrtc-builtins.so.13.0 is corrupted, ...").
      size_t end = hit + prefix.size();
      while (end < buf.size() && ((buf[end] >= '0' && buf[end] <= '9') || buf[end] == '.')) ++end;
      while (end > hit + prefix.size() && buf[end - 1] == '.') --end;
      if (end == hit + prefix.size()) return std::nullopt;
      return buf.substr(hit, end - hit);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

namespace {
// The loader's counts of objects added to and removed from the process so far; {0, 0} where its
// dl_phdr_info is too old to carry them.
std::pair<unsigned long long, unsigned long long> load_counts() {
  std::pair<unsigned long long, unsigned long long> counts{0, 0};
  ::dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t size, void *data) {
        if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
          *static_cast<std::pair<unsigned long long, unsigned long long> *>(data) = {
              info->dlpi_adds, info->dlpi_subs};
        return 1;  // the first object carries them: the walk stops there
      },
      &counts);
  return counts;
}

std::shared_ptr<const std::vector<LoadedImage>> walk_loaded_images() {
  auto images = std::make_shared<std::vector<LoadedImage>>();
  ::dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *data) {
        auto *out = static_cast<std::vector<LoadedImage> *>(data);
        LoadedImage image;
        image.path = info->dlpi_name ? info->dlpi_name : "";
        for (int i = 0; i < info->dlpi_phnum && image.build_id.empty(); ++i) {
          const ElfW(Phdr) &p = info->dlpi_phdr[i];
          if (p.p_type == PT_NOTE)
            image.build_id = build_id_in_notes(
                reinterpret_cast<const uint8_t *>(info->dlpi_addr + p.p_vaddr), p.p_memsz);
        }
        out->push_back(std::move(image));
        return 0;
      },
      images.get());
  return images;
}
}  // namespace

std::shared_ptr<const std::vector<LoadedImage>> loaded_images() {
  static ForkSafeMutex mutex;
  static std::pair<unsigned long long, unsigned long long> walked_at{0, 0};
  static std::shared_ptr<const std::vector<LoadedImage>> walked;
  const auto counts = load_counts();
  const bool counted = counts.first != 0;  // a loader that counts: at least the program was added
  {
    std::lock_guard lock(mutex);
    if (counted && walked && counts == walked_at) return walked;
  }
  auto images = walk_loaded_images();
  // Kept under the counts read before the walk: an object added during it moves them again.
  std::lock_guard lock(mutex);
  walked_at = counts;
  walked = images;
  return images;
}

std::string predict_dlopen_path(std::string_view soname, const ElfFacts &caller,
                                const std::string &caller_dir) {
  // One pass: replacing in place and searching again from the start never ended for a caller
  // whose directory holds "$ORIGIN" itself.
  auto expand = [&](const std::string &dir) {
    std::string d;
    for (size_t at = 0; at < dir.size();) {
      const size_t token = dir.compare(at, 9, "${ORIGIN}") == 0 ? 9
                           : dir.compare(at, 7, "$ORIGIN") == 0 ? 7
                                                                : 0;
      if (token) {
        d += caller_dir;
        at += token;
      } else {
        d += dir[at++];
      }
    }
    return d;
  };
  auto in_dirs = [&](const std::vector<std::string> &dirs) -> std::string {
    for (const std::string &dir : dirs) {
      const std::string path = expand(dir.empty() ? "." : dir) + "/" + std::string(soname);
      if (is_regular_file(path)) return path;
    }
    return "";
  };
  std::string found;
  if (caller.runpath.empty() && !(found = in_dirs(caller.rpath)).empty()) return found;
  if (const char *llp = trusted_env("LD_LIBRARY_PATH"))
    if (!(found = in_dirs(split_path_list(llp))).empty()) return found;
  if (!(found = in_dirs(caller.runpath)).empty()) return found;
  if (!(found = ld_cache_lookup(soname)).empty() && is_regular_file(found)) return found;
  return in_dirs({"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                  "/lib", "/usr/lib"});
}

}  // namespace progcache
