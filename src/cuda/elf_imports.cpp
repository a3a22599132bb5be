#include "cuda/elf_imports.hpp"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <optional>

namespace progcache {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_X86_64_64;
constexpr bool kKnownArchitecture = true;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
constexpr uint32_t kAbsolute = R_AARCH64_ABS64;
constexpr bool kKnownArchitecture = true;
#else
constexpr uint32_t kJumpSlot = ~0u, kGlobDat = ~0u, kAbsolute = ~0u;
constexpr bool kKnownArchitecture = false;
#endif

// An object as dl_iterate_phdr describes it: where it is mapped and its RELRO range.
struct Mapping {
  ElfW(Addr) base = 0;
  uintptr_t low = UINTPTR_MAX, high = 0;  // the span of its PT_LOAD segments
  uintptr_t relro_begin = 0, relro_end = 0;
  bool found = false;
};

Mapping mapping_of(ElfW(Addr) base) {
  Mapping m;
  m.base = base;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        auto *m = static_cast<Mapping *>(data);
        if (info->dlpi_addr != m->base) return 0;
        for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = info->dlpi_phdr[i];
          const uintptr_t begin = info->dlpi_addr + ph.p_vaddr, end = begin + ph.p_memsz;
          if (ph.p_type == PT_LOAD) {
            m->low = std::min(m->low, begin);
            m->high = std::max(m->high, end);
          } else if (ph.p_type == PT_GNU_RELRO) {
            m->relro_begin = begin;
            m->relro_end = end;
          }
        }
        m->found = true;
        return 1;
      },
      &m);
  return m;
}

// The dynamic section's tables. glibc rewrites most d_ptr values to run-time addresses in
// place; where a loader leaves them as offsets (read-only dynamic sections) the base is added.
struct DynamicTables {
  const ElfW(Sym) *symtab = nullptr;
  const char *strtab = nullptr;
  size_t strsz = 0;
  const ElfW(Rela) *jmprel = nullptr;
  size_t jmprel_size = 0;
  const ElfW(Rela) *rela = nullptr;
  size_t rela_size = 0;
  bool rela_format = true;  // DT_PLTREL is DT_RELA (the only format on x86_64 and aarch64)
};

std::optional<DynamicTables> tables_of(const link_map *map, const Mapping &m) {
  if (!kKnownArchitecture || !map->l_ld) return std::nullopt;
  DynamicTables t;
  auto address = [&](ElfW(Addr) v) -> uintptr_t {
    return v >= m.low && v < m.high ? v : v + map->l_addr;
  };
  for (const ElfW(Dyn) *d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        t.symtab = reinterpret_cast<const ElfW(Sym) *>(address(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        t.strtab = reinterpret_cast<const char *>(address(d->d_un.d_ptr));
        break;
      case DT_STRSZ:
        t.strsz = d->d_un.d_val;
        break;
      case DT_JMPREL:
        t.jmprel = reinterpret_cast<const ElfW(Rela) *>(address(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        t.jmprel_size = d->d_un.d_val;
        break;
      case DT_PLTREL:
        t.rela_format = d->d_un.d_val == DT_RELA;
        break;
      case DT_RELA:
        t.rela = reinterpret_cast<const ElfW(Rela) *>(address(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        t.rela_size = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (!t.symtab || !t.strtab || !t.rela_format) return std::nullopt;
  return t;
}

// The loaded object at path: its link_map (the loader's reference is dropped again at once; the
// object stays mapped because whoever loaded it holds its own).
const link_map *link_map_of(const std::string &path) {
  void *handle = ::dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (!handle) return nullptr;
  link_map *map = nullptr;
  if (::dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0) map = nullptr;
  ::dlclose(handle);
  return map;
}

// Calls fn(name, slot, addend, type) for every relocation that names a symbol.
template <typename Fn>
void for_each_symbol_relocation(const link_map *map, const DynamicTables &t, Fn &&fn) {
  for (const auto &[table, size] : {std::pair{t.jmprel, t.jmprel_size}, {t.rela, t.rela_size}}) {
    if (!table) continue;
    for (size_t i = 0; i < size / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela) &r = table[i];
      const size_t sym = ELF64_R_SYM(r.r_info);
      if (sym == 0) continue;
      const ElfW(Sym) &s = t.symtab[sym];
      if (t.strsz && s.st_name >= t.strsz) continue;
      fn(t.strtab + s.st_name, s, reinterpret_cast<void **>(map->l_addr + r.r_offset), r.r_addend,
         uint32_t(ELF64_R_TYPE(r.r_info)));
    }
  }
}

bool write_slot(void **slot, void *value, const Mapping &m) {
  const uintptr_t page_size = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t at = reinterpret_cast<uintptr_t>(slot);
  void *page = reinterpret_cast<void *>(at & ~(page_size - 1));
  if (::mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return false;
  // A slot another thread may be calling through: one aligned store, old or new value.
  reinterpret_cast<std::atomic<void *> *>(slot)->store(value, std::memory_order_release);
  if (at >= m.relro_begin && at < m.relro_end) (void)::mprotect(page, page_size, PROT_READ);
  return true;
}

}  // namespace

std::vector<std::string> loaded_object_paths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        if (info->dlpi_name && *info->dlpi_name)
          static_cast<std::vector<std::string> *>(data)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

int patch_imports(const std::string &path, const std::vector<ImportHook> &hooks) {
  const link_map *map = link_map_of(path);
  if (!map) return -1;
  const Mapping m = mapping_of(map->l_addr);
  const std::optional<DynamicTables> t = m.found ? tables_of(map, m) : std::nullopt;
  if (!t) return -1;
  int patched = 0;
  bool failed = false;
  for_each_symbol_relocation(
      map, *t,
      [&](const char *name, const ElfW(Sym) & sym, void **slot, ElfW(Sxword) addend,
          uint32_t type) {
        if (sym.st_shndx != SHN_UNDEF || addend != 0) return;
        if (type != kJumpSlot && type != kGlobDat && type != kAbsolute) return;
        for (const ImportHook &h : hooks) {
          if (std::strcmp(h.name, name) != 0) continue;
          void *current = reinterpret_cast<std::atomic<void *> *>(slot)->load();
          if (current == h.replacement) return;
          const uintptr_t c = reinterpret_cast<uintptr_t>(current);
          // A lazily bound slot still points at the object's own PLT stub.
          void *target = c >= m.low && c < m.high ? ::dlsym(RTLD_DEFAULT, name) : current;
          if (!target) {
            failed = true;
            return;
          }
          if (!*h.original) *h.original = target;
          if (!write_slot(slot, h.replacement, m)) {
            failed = true;
            return;
          }
          ++patched;
          return;
        }
      });
  return failed ? -1 : patched;
}

std::vector<std::string> imported_functions(const std::string &path) {
  std::vector<std::string> names;
  const link_map *map = link_map_of(path);
  if (!map) return names;
  const Mapping m = mapping_of(map->l_addr);
  const std::optional<DynamicTables> t = m.found ? tables_of(map, m) : std::nullopt;
  if (!t) return names;
  for_each_symbol_relocation(
      map, *t, [&](const char *name, const ElfW(Sym) & sym, void **, ElfW(Sxword), uint32_t) {
        const int type = ELF64_ST_TYPE(sym.st_info);
        if (sym.st_shndx == SHN_UNDEF && (type == STT_FUNC || type == STT_NOTYPE) && *name)
          names.emplace_back(name);
      });
  return names;
}

}  // namespace progcache
