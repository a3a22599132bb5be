/* A client of nvJitLink and libNVVM written only against their headers and linked with
 * -lnvJitLink -lnvvm, as an application is (tests/dropin/jit_dropin_test.sh runs it on the real
 * libraries and through `progcache run`, and compares everything it writes).
 *
 * Usage: jit_client link|nvvm|link-ok|nvvm-ok OUTDIR INPUTDIR MAPSFILE (-ok: successes only)
 * Every call's status goes to OUTDIR/transcript.txt; every getter's size and bytes to a file of
 * its own; the JIT libraries this process mapped to MAPSFILE. */
#include <nvJitLink.h>
#include <nvvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *out_dir, *in_dir;
static int successes_only; /* modes link-ok and nvvm-ok: only the cases that succeed */
static FILE *transcript;

static void say(const char *case_name, const char *call, int result) {
  fprintf(transcript, "%s %s: %d\n", case_name, call, result);
}

static char *slurp(const char *name, size_t *size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", in_dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  *size = fread(buf, 1, (size_t)n, f);
  buf[*size] = 0;
  fclose(f);
  return buf;
}

static void write_file(const char *case_name, const char *what, const void *bytes, size_t n) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", out_dir, case_name, what);
  FILE *f = fopen(path, "wb");
  if (!f) return;
  fwrite(bytes, 1, n, f);
  fclose(f);
}

/* One getter pair: the size call's status and value, then (when it succeeded) the bytes. */
#define DUMP(case_name, what, size_fn, data_fn, handle)                   \
  do {                                                                    \
    size_t n_ = 777777;                                                   \
    int r_ = size_fn(handle, &n_);                                        \
    fprintf(transcript, "%s %s size: %d %zu\n", case_name, what, r_, n_); \
    if (r_ == 0 && n_ != 777777) {                                        \
      char *b_ = malloc(n_ + 1);                                          \
      r_ = data_fn(handle, b_);                                           \
      say(case_name, what, r_);                                           \
      if (r_ == 0) write_file(case_name, what, b_, n_);                   \
      free(b_);                                                           \
    }                                                                     \
  } while (0)

static void dump_link(const char *c, nvJitLinkHandle h) {
  DUMP(c, "cubin", nvJitLinkGetLinkedCubinSize, nvJitLinkGetLinkedCubin, h);
  DUMP(c, "ptx", nvJitLinkGetLinkedPtxSize, nvJitLinkGetLinkedPtx, h);
  DUMP(c, "error_log", nvJitLinkGetErrorLogSize, nvJitLinkGetErrorLog, h);
  DUMP(c, "info_log", nvJitLinkGetInfoLogSize, nvJitLinkGetInfoLog, h);
}

static void add_input(const char *c, nvJitLinkHandle h, nvJitLinkInputType type, const char *file,
                      int by_path) {
  char call[256];
  snprintf(call, sizeof call, "%s %s", by_path ? "add_file" : "add_data", file);
  if (by_path) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", in_dir, file);
    say(c, call, nvJitLinkAddFile(h, type, path));
    return;
  }
  size_t n = 0;
  char *bytes = slurp(file, &n);
  if (!bytes) {
    say(c, "missing input", 1);
    return;
  }
  say(c, call, nvJitLinkAddData(h, type, bytes, n, file));
  free(bytes); /* nvJitLink keeps its own copy */
}

/* One link: options, inputs ("T:file" with T one of c p l f a, a capital to add by path). */
static void link_case(const char *c, int num_options, const char **options, const char **inputs,
                      int complete_times) {
  nvJitLinkHandle h = NULL;
  int rc = nvJitLinkCreate(&h, (uint32_t)num_options, options);
  say(c, "create", rc);
  if (rc != 0) return;
  for (const char **in = inputs; *in; ++in) {
    const char t = (*in)[0];
    const int by_path = t >= 'A' && t <= 'Z';
    const char lower = by_path ? (char)(t - 'A' + 'a') : t;
    nvJitLinkInputType type = lower == 'c'   ? NVJITLINK_INPUT_CUBIN
                              : lower == 'p' ? NVJITLINK_INPUT_PTX
                              : lower == 'l' ? NVJITLINK_INPUT_LTOIR
                              : lower == 'f' ? NVJITLINK_INPUT_FATBIN
                                             : NVJITLINK_INPUT_ANY;
    add_input(c, h, type, *in + 2, by_path);
  }
  if (complete_times < 0) { /* the getters before Complete */
    char before[128];
    snprintf(before, sizeof before, "%s_before", c);
    dump_link(before, h);
    complete_times = 1;
  }
  for (int i = 0; i < complete_times; ++i) say(c, "complete", nvJitLinkComplete(h));
  dump_link(c, h);
  say(c, "destroy", nvJitLinkDestroy(&h));
}

static void links(void) {
  const char *arch[] = {"-arch=sm_90"};
  const char *lto[] = {"-arch=sm_90", "-lto"};
  const char *lto_ptx[] = {"-arch=sm_90", "-lto", "-ptx"};
  const char *bogus[] = {"-arch=sm_90", "-bogus"};
  const char *ptx_only[] = {"p:k.ptx", NULL};
  link_case("ptx", 1, arch, ptx_only, 1);
  link_case("lto", 2, lto, (const char *[]){"l:a.ltoir", "L:b.ltoir", NULL}, 1);
  link_case("lto_to_ptx", 3, lto_ptx, (const char *[]){"l:a.ltoir", "l:b.ltoir", NULL}, 1);
  link_case("ptx_cubin", 1, arch, (const char *[]){"p:c.ptx", "c:d.cubin", NULL}, 1);
  link_case("fatbin", 1, arch, (const char *[]){"p:c.ptx", "F:d.fatbin", NULL}, 1);
  link_case("any", 1, arch, (const char *[]){"A:k.ptx", NULL}, 1);
  unsigned major = 0, minor = 0;
  say("version", "call", nvJitLinkVersion(&major, &minor));
  fprintf(transcript, "version %u.%u\n", major, minor);
  if (successes_only) return;
  link_case("bad_option", 2, bogus, ptx_only, 1);
  link_case("no_arch", 0, NULL, ptx_only, 1);
  link_case("garbage", 1, arch, (const char *[]){"p:garbage.ptx", NULL}, 1);
  link_case("unresolved", 2, lto, (const char *[]){"l:a.ltoir", NULL}, 1);
  link_case("before", 1, arch, ptx_only, -1);
  link_case("twice", 1, arch, ptx_only, 2);
  link_case("missing_file", 1, arch, (const char *[]){"P:no-such.ptx", NULL}, 1);
  say("null", "complete", nvJitLinkComplete(NULL));
  say("null", "destroy", nvJitLinkDestroy(NULL));
}

static void dump_nvvm(const char *c, nvvmProgram p) {
  DUMP(c, "result", nvvmGetCompiledResultSize, nvvmGetCompiledResult, p);
  DUMP(c, "log", nvvmGetProgramLogSize, nvvmGetProgramLog, p);
}

/* One libNVVM program: modules ("m:file" added, "n:file" added with no name, "z:file" lazily,
 * "v:" a verify and the log after it),
 * verified first when verify, compiled complete_times times (-1: the log asked for before). */
static void nvvm_case(const char *c, const char **modules, int verify, int num_options,
                      const char **options, int compile_times) {
  nvvmProgram p = NULL;
  say(c, "create", nvvmCreateProgram(&p));
  for (const char **m = modules; *m; ++m) {
    if ((*m)[0] == 'v') { /* a verify here, and the log it leaves (numba-cuda asks for it) */
      char verified[128];
      snprintf(verified, sizeof verified, "%s_verified", c);
      say(c, "verify here", nvvmVerifyProgram(p, num_options, options));
      DUMP(verified, "log", nvvmGetProgramLogSize, nvvmGetProgramLog, p);
      continue;
    }
    size_t n = 0;
    char *bytes = slurp(*m + 2, &n);
    if (!bytes) {
      say(c, "missing module", 1);
      continue;
    }
    const char *name = (*m)[0] == 'n' ? NULL : *m + 2;
    char call[256];
    snprintf(call, sizeof call, "add %s", *m);
    say(c, call,
        (*m)[0] == 'z' ? nvvmLazyAddModuleToProgram(p, bytes, n, name)
                       : nvvmAddModuleToProgram(p, bytes, n, name));
    free(bytes);
  }
  if (verify) say(c, "verify", nvvmVerifyProgram(p, num_options, options));
  if (compile_times < 0) {
    char before[128];
    snprintf(before, sizeof before, "%s_before", c);
    dump_nvvm(before, p);
    compile_times = 1;
  }
  for (int i = 0; i < compile_times; ++i)
    say(c, "compile", nvvmCompileProgram(p, num_options, options));
  dump_nvvm(c, p);
  say(c, "destroy", nvvmDestroyProgram(&p));
}

static void nvvm(void) {
  const char *arch[] = {"-arch=compute_90"};
  const char *opt[] = {"-arch=compute_90", "-opt=3", "-ftz=1"};
  const char *lto[] = {"-arch=compute_90", "-gen-lto"};
  const char *bogus[] = {"-arch=compute_90", "-bogus"};
  nvvm_case("libdevice", (const char *[]){"m:kernel.ll", "z:libdevice.10.bc", NULL}, 0, 1, arch, 1);
  nvvm_case("two", (const char *[]){"n:caller.ll", "m:helper.ll", NULL}, 1, 3, opt, 1);
  nvvm_case("numba_style",
            (const char *[]){"n:caller.ll", "n:helper.ll", "v:", "z:libdevice.10.bc", NULL}, 0, 1,
            arch, 1);
  nvvm_case("lto", (const char *[]){"m:kernel.ll", "z:libdevice.10.bc", NULL}, 0, 2, lto, 1);
  int v[6] = {0};
  say("version", "call", nvvmVersion(&v[0], &v[1]));
  say("version", "ir", nvvmIRVersion(&v[2], &v[3], &v[4], &v[5]));
  fprintf(transcript, "version %d.%d ir %d.%d debug %d.%d\n", v[0], v[1], v[2], v[3], v[4], v[5]);
  for (int i = 0; i < 10; ++i) fprintf(transcript, "error %d: %s\n", i, nvvmGetErrorString(i));
  if (successes_only) return;
  for (int i = 10; i < 12; ++i) fprintf(transcript, "error %d: %s\n", i, nvvmGetErrorString(i));
  nvvm_case("bad_ir", (const char *[]){"m:broken.ll", NULL}, 1, 1, arch, 1);
  nvvm_case("bad_option", (const char *[]){"m:helper.ll", NULL}, 0, 2, bogus, 1);
  nvvm_case("no_module", (const char *[]){NULL}, 0, 1, arch, 1);
  nvvm_case("unresolved", (const char *[]){"m:caller.ll", NULL}, 0, 1, arch, 1);
  nvvm_case("before", (const char *[]){"m:helper.ll", NULL}, 0, 1, arch, -1);
  nvvm_case("twice", (const char *[]){"m:helper.ll", NULL}, 0, 1, arch, 2);
  say("null", "compile", nvvmCompileProgram(NULL, 0, NULL));
  say("null", "create", nvvmCreateProgram(NULL));
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: jit_client link|nvvm|link-ok|nvvm-ok OUTDIR INPUTDIR MAPSFILE\n");
    return 2;
  }
  out_dir = argv[2];
  in_dir = argv[3];
  char path[4096];
  snprintf(path, sizeof path, "%s/transcript.txt", out_dir);
  transcript = fopen(path, "w");
  if (!transcript) return 1;
  successes_only = strstr(argv[1], "-ok") != NULL;
  if (strncmp(argv[1], "link", 4) == 0)
    links();
  else
    nvvm();
  fclose(transcript);
  FILE *maps = fopen("/proc/self/maps", "r"), *out = fopen(argv[4], "w");
  char line[8192];
  while (maps && out && fgets(line, sizeof line, maps))
    if (strstr(line, "libnvJitLink") || strstr(line, "libnvvm")) fputs(line, out);
  if (maps) fclose(maps);
  if (out) fclose(out);
  return 0;
}
