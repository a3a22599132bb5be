/* A fake CUDA driver for tests: just the entry points progcache calls. cuModuleLoadData accepts
 * only an ELF image of machine type EM_CUDA (190); cuModuleGetFunction finds the name in the
 * image's ELF symbol table. Built only for tests; never claims to run anything. */
#include <elf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
enum {
  OK = 0,
  ERR_INVALID_VALUE = 1,
  ERR_NOT_INITIALIZED = 3,
  ERR_INVALID_IMAGE = 200,
  ERR_INVALID_HANDLE = 400,
  ERR_NOT_FOUND = 500
};

struct module {
  unsigned char *image;
  size_t size;
};
static int initialized;
static int context = 1;

CUresult cuInit(unsigned flags) {
  (void)flags;
  /* FAKE_CUDA_INIT_MS=N: initialisation takes N ms (a fork() in another thread meets it). */
  const char *delay = getenv("FAKE_CUDA_INIT_MS");
  if (delay) usleep((useconds_t)atoi(delay) * 1000);
  initialized = 1;
  return OK;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
  if (!initialized) return ERR_NOT_INITIALIZED;
  if (ordinal != 0) return ERR_INVALID_VALUE;
  *dev = 0;
  return OK;
}
CUresult cuCtxGetCurrent(void **ctx) {
  *ctx = NULL; /* no current context: progcache must use the primary one */
  return OK;
}
CUresult cuCtxSetCurrent(void *ctx) {
  return ctx == &context ? OK : ERR_INVALID_VALUE;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  if (dev != 0) return ERR_INVALID_VALUE;
  *ctx = &context;
  return OK;
}

/* The size of a well-formed ELF64 image, or 0 if it is not one for EM_CUDA. */
static size_t elf_size(const unsigned char *p) {
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)p;
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64) return 0;
  if (eh->e_machine != 190 /* EM_CUDA */) return 0;
  size_t end = eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(p + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i)
    if (sh[i].sh_type != SHT_NOBITS && sh[i].sh_offset + sh[i].sh_size > end)
      end = sh[i].sh_offset + sh[i].sh_size;
  return end;
}

CUresult cuModuleLoadData(void **module, const void *image) {
  if (!initialized) return ERR_NOT_INITIALIZED;
  const size_t size = image ? elf_size(image) : 0;
  if (!size) return ERR_INVALID_IMAGE;
  struct module *m = malloc(sizeof *m);
  m->image = malloc(size);
  memcpy(m->image, image, size);
  m->size = size;
  *module = m;
  return OK;
}

CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  struct module *m = module;
  if (!m) return ERR_INVALID_HANDLE;
  const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m->image;
  const Elf64_Shdr *sh = (const Elf64_Shdr *)(m->image + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_SYMTAB) continue;
    const Elf64_Sym *syms = (const Elf64_Sym *)(m->image + sh[i].sh_offset);
    const char *strtab = (const char *)(m->image + sh[sh[i].sh_link].sh_offset);
    for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Sym); ++j)
      if (ELF64_ST_TYPE(syms[j].st_info) == STT_FUNC &&
          strcmp(strtab + syms[j].st_name, name) == 0) {
        *function = (void *)&syms[j];
        return OK;
      }
  }
  return ERR_NOT_FOUND;
}

CUresult cuModuleUnload(void *module) {
  struct module *m = module;
  if (!m) return ERR_INVALID_HANDLE;
  free(m->image);
  free(m);
  return OK;
}

CUresult cuGetErrorName(CUresult r, const char **s) {
  *s = r == ERR_INVALID_IMAGE ? "CUDA_ERROR_INVALID_IMAGE"
       : r == ERR_NOT_FOUND   ? "CUDA_ERROR_NOT_FOUND"
                              : "CUDA_ERROR_FAKE";
  return OK;
}
CUresult cuGetErrorString(CUresult r, const char **s) {
  *s = r == ERR_INVALID_IMAGE ? "device kernel image is invalid" : "fake driver error";
  return OK;
}
