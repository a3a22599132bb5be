/* An NVRTC client written against nvrtc.h and linked with -lnvrtc, nothing of progcache: the
 * differential test runs it on the real NVRTC and on the drop-in (cold and warm) and compares
 * everything it writes.
 * Usage: nvrtc_client kernels|errors|threads|startup OUTDIR INCLUDE_DIR MAPS_FILE
 * OUTDIR gets transcript.txt (every status, size and log; one per thread in threads mode, where
 * four threads compile one program at once) and one file per output's bytes;
 * MAPS_FILE gets the lines of /proc/self/maps that name an nvrtc library. */
#include <nvrtc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread FILE *transcript;
static const char *outdir;

static void save(const char *case_name, const char *what, const char *bytes, size_t size) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.%s", outdir, case_name, what);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, size, f) != size || fclose(f) != 0) {
    perror(path);
    exit(2);
  }
}

typedef nvrtcResult (*size_fn)(nvrtcProgram, size_t *);
typedef nvrtcResult (*data_fn)(nvrtcProgram, char *);

static void dump_output(const char *case_name, nvrtcProgram p, const char *what, size_fn size_of,
                        data_fn data_of) {
  size_t size = 0;
  nvrtcResult rc = size_of(p, &size);
  fprintf(transcript, "  %s size: %s %zu\n", what, nvrtcGetErrorString(rc), rc ? 0 : size);
  if (rc != NVRTC_SUCCESS) return;
  char *buf = malloc(size + 1);
  rc = data_of(p, buf);
  fprintf(transcript, "  %s data: %s\n", what, nvrtcGetErrorString(rc));
  if (rc == NVRTC_SUCCESS) save(case_name, what, buf, size);
  free(buf);
}

static void dump_log(const char *case_name, nvrtcProgram p) {
  size_t size = 0;
  nvrtcResult rc = nvrtcGetProgramLogSize(p, &size);
  fprintf(transcript, "  log size: %s %zu\n", nvrtcGetErrorString(rc), rc ? 0 : size);
  if (rc != NVRTC_SUCCESS) return;
  char *buf = malloc(size + 1);
  rc = nvrtcGetProgramLog(p, buf);
  fprintf(transcript, "  log: %s\n", nvrtcGetErrorString(rc));
  if (rc == NVRTC_SUCCESS) save(case_name, "log", buf, size);
  free(buf);
}

/* Compiles one program and records every answer NVRTC gives about it. */
static void run_case(const char *case_name, const char *source, const char *name, int num_headers,
                     const char *const *headers, const char *const *include_names,
                     const char *const *exprs, int num_exprs, const char *const *options,
                     int num_options) {
  nvrtcProgram p = NULL;
  nvrtcResult rc = nvrtcCreateProgram(&p, source, name, num_headers, headers, include_names);
  fprintf(transcript, "%s\n  create: %s\n", case_name, nvrtcGetErrorString(rc));
  if (rc != NVRTC_SUCCESS) return;
  for (int i = 0; i < num_exprs; ++i)
    fprintf(transcript, "  add %s: %s\n", exprs[i],
            nvrtcGetErrorString(nvrtcAddNameExpression(p, exprs[i])));
  rc = nvrtcCompileProgram(p, num_options, options);
  fprintf(transcript, "  compile: %s\n", nvrtcGetErrorString(rc));
  dump_log(case_name, p);
  dump_output(case_name, p, "ptx", nvrtcGetPTXSize, nvrtcGetPTX);
  dump_output(case_name, p, "cubin", nvrtcGetCUBINSize, nvrtcGetCUBIN);
  dump_output(case_name, p, "ltoir", nvrtcGetLTOIRSize, nvrtcGetLTOIR);
  dump_output(case_name, p, "optixir", nvrtcGetOptiXIRSize, nvrtcGetOptiXIR);
  for (int i = 0; i <= num_exprs; ++i) {
    const char *e = i < num_exprs ? exprs[i] : "never_added<char>";
    const char *lowered = NULL;
    rc = nvrtcGetLoweredName(p, e, &lowered);
    fprintf(transcript, "  lowered %s: %s %s\n", e, nvrtcGetErrorString(rc),
            rc == NVRTC_SUCCESS && lowered ? lowered : "-");
  }
  rc = nvrtcDestroyProgram(&p);
  fprintf(transcript, "  destroy: %s %s\n", nvrtcGetErrorString(rc), p ? "not-null" : "null");
}

static const char kTemplates[] =
    "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
    "extern \"C\" __global__ void plain(float *x) { x[threadIdx.x] += 1.0f; }\n";
static const char kMemHeader[] =
    "#include \"params.h\"\n"
    "extern \"C\" __global__ void with_params(int *x) { x[threadIdx.x] = FACTOR; }\n";
static const char kDiskHeader[] =
    "#include \"disk_header.h\"\n"
    "extern \"C\" __global__ void with_disk(int *x) { x[threadIdx.x] = DISK_FACTOR; }\n";
static const char kWarning[] =
    "extern \"C\" __global__ void warns(int *x) { int unused = 3; x[0] = 1; }\n";

static void sequences(void);

static void kernels(const char *include_dir) {
  const char *exprs[] = {"scale<float>", "scale<int>", "&plain"};
  const char *sm90[] = {"-arch=sm_90"};
  run_case("templates", kTemplates, "templates.cu", 0, NULL, NULL, exprs, 3, sm90, 1);
  const char *hs[] = {"#define FACTOR 3\n"}, *hn[] = {"params.h"};
  const char *sm80[] = {"--gpu-architecture=sm_80", "-std=c++17"};
  run_case("memheaders", kMemHeader, "memheaders.cu", 1, hs, hn, NULL, 0, sm80, 2);
  const char *disk[] = {"-I", include_dir, "-arch=sm_90"};
  run_case("diskheaders", kDiskHeader, "diskheaders.cu", 0, NULL, NULL, NULL, 0, disk, 3);
  const char *ptx[] = {"-arch=compute_90"};
  run_case("ptx", kTemplates, NULL, 0, NULL, NULL, exprs, 1, ptx, 1);
  const char *lto[] = {"-arch=sm_90", "-dlto"};
  run_case("ltoir", kTemplates, "ltoir.cu", 0, NULL, NULL, exprs, 2, lto, 2);
  /* A log with a warning (not -Xptxas -v: its "Compile time" line differs run to run). */
  const char *warn[] = {"-arch=sm_90", "-std=c++20"};
  run_case("warning", kWarning, "warning.cu", 0, NULL, NULL, NULL, 0, warn, 2);
}

/* One program's calls in an order that exercises NVRTC's state: a name expression added after a
 * compile NVRTC refused (an unknown option, a compilation error), the program compiled again. */
static void sequence(const char *case_name, const char *source, const char *const *first_options,
                     int first_count) {
  const char *sm90[] = {"-arch=sm_90"};
  nvrtcProgram p = NULL;
  nvrtcResult rc = nvrtcCreateProgram(&p, source, "seq.cu", 0, NULL, NULL);
  fprintf(transcript, "%s\n  create: %s\n", case_name, nvrtcGetErrorString(rc));
  if (rc != NVRTC_SUCCESS) return;
  const char *lowered = NULL;
  size_t size = 12345; /* NVRTC leaves it as it is after a refused compile */
  fprintf(transcript, "  add float: %s\n",
          nvrtcGetErrorString(nvrtcAddNameExpression(p, "g<float>")));
  fprintf(transcript, "  compile: %s\n",
          nvrtcGetErrorString(nvrtcCompileProgram(p, first_count, first_options)));
  rc = nvrtcGetPTXSize(p, &size);
  fprintf(transcript, "  ptx size: %s %zu\n", nvrtcGetErrorString(rc), size);
  rc = nvrtcGetLoweredName(p, "g<float>", &lowered);
  fprintf(transcript, "  lowered float: %s %s\n", nvrtcGetErrorString(rc),
          rc == NVRTC_SUCCESS && lowered ? lowered : "-");
  fprintf(transcript, "  add double: %s\n",
          nvrtcGetErrorString(nvrtcAddNameExpression(p, "g<double>")));
  fprintf(transcript, "  compile again: %s\n",
          nvrtcGetErrorString(nvrtcCompileProgram(p, 1, sm90)));
  for (int i = 0; i < 2; ++i) {
    const char *e = i ? "g<double>" : "g<float>";
    lowered = NULL;
    rc = nvrtcGetLoweredName(p, e, &lowered);
    fprintf(transcript, "  lowered %s: %s %s\n", e, nvrtcGetErrorString(rc),
            rc == NVRTC_SUCCESS && lowered ? lowered : "-");
  }
  dump_output(case_name, p, "ptx", nvrtcGetPTXSize, nvrtcGetPTX);
  fprintf(transcript, "  add int: %s\n", nvrtcGetErrorString(nvrtcAddNameExpression(p, "g<int>")));
  fprintf(transcript, "  destroy: %s\n", nvrtcGetErrorString(nvrtcDestroyProgram(&p)));
}

static void sequences(void) {
  static const char good[] = "template <class T> __global__ void g(T *x) { *x = 1; }\n";
  static const char bad[] = "template <class T> __global__ void g(T *x) { *x = nope; }\n";
  const char *unknown[] = {"-arch=sm_90", "--no-such-nvrtc-option"};
  const char *sm90[] = {"-arch=sm_90"};
  sequence("after_invalid_option", good, unknown, 2);
  sequence("after_compile_error", bad, sm90, 1);
  sequence("after_success", good, sm90, 1);
}

/* What a JIT library does when it starts (jitify2): ask which architectures NVRTC supports,
 * compile a program that fails on purpose and read its log, then compile its kernels. A warm
 * start answers all of it without loading the real NVRTC. */
static void startup(void) {
  int n = 0;
  nvrtcResult rc = nvrtcGetNumSupportedArchs(&n);
  fprintf(transcript, "supported archs: %s %d\n", nvrtcGetErrorString(rc), n);
  int archs[256] = {0};
  if (rc == NVRTC_SUCCESS && n > 0 && n <= 256) {
    rc = nvrtcGetSupportedArchs(archs);
    fprintf(transcript, "archs: %s", nvrtcGetErrorString(rc));
    for (int i = 0; i < n; ++i) fprintf(transcript, " %d", archs[i]);
    fprintf(transcript, "\n");
  }
  const char *sm90[] = {"-arch=sm_90"};
  run_case("stop", "#include <__JITIFY_STOP_COMPILATION>\n", "jitify_probe.cu", 0, NULL, NULL, NULL,
           0, sm90, 1);
  const char *exprs[] = {"scale<float>"};
  run_case("kernel", kTemplates, "jitify_kernel.cu", 0, NULL, NULL, exprs, 1, sm90, 1);
}

/* What NVRTC answers to mistakes: none of it may change behind the drop-in. */
static void errors(void) {
  const char *sm90[] = {"-arch=sm_90"};
  run_case("compile_error", "__global__ void k( { }\n", "bad.cu", 0, NULL, NULL, NULL, 0, sm90, 1);
  const char *bad_option[] = {"--definitely-not-an-option"};
  run_case("bad_option", kTemplates, "opt.cu", 0, NULL, NULL, NULL, 0, bad_option, 1);
  const char *bad_expr[] = {"no_such_kernel<float>"};
  run_case("bad_expression", kTemplates, "expr.cu", 0, NULL, NULL, bad_expr, 1, sm90, 1);

  nvrtcProgram p = NULL;
  fprintf(transcript, "misuse\n  create NULL prog: %s\n",
          nvrtcGetErrorString(nvrtcCreateProgram(NULL, kTemplates, "x", 0, NULL, NULL)));
  fprintf(transcript, "  create NULL source: %s\n",
          nvrtcGetErrorString(nvrtcCreateProgram(&p, NULL, "x", 0, NULL, NULL)));
  fprintf(transcript, "  create -1 headers: %s\n",
          nvrtcGetErrorString(nvrtcCreateProgram(&p, kTemplates, "x", -1, NULL, NULL)));
  fprintf(transcript, "  destroy NULL: %s\n", nvrtcGetErrorString(nvrtcDestroyProgram(NULL)));
  fprintf(transcript, "  compile NULL program: %s\n",
          nvrtcGetErrorString(nvrtcCompileProgram(NULL, 0, NULL)));
  nvrtcResult rc = nvrtcCreateProgram(&p, kTemplates, "misuse.cu", 0, NULL, NULL);
  fprintf(transcript, "  create: %s\n", nvrtcGetErrorString(rc));
  if (rc != NVRTC_SUCCESS) return;
  const char *lowered = NULL;
  size_t size = 0;
  fprintf(transcript, "  add NULL expression: %s\n",
          nvrtcGetErrorString(nvrtcAddNameExpression(p, NULL)));
  fprintf(transcript, "  add: %s\n",
          nvrtcGetErrorString(nvrtcAddNameExpression(p, "scale<float>")));
  fprintf(transcript, "  lowered before compile: %s\n",
          nvrtcGetErrorString(nvrtcGetLoweredName(p, "scale<float>", &lowered)));
  fprintf(transcript, "  compile: %s\n", nvrtcGetErrorString(nvrtcCompileProgram(p, 1, sm90)));
  fprintf(transcript, "  add after compile: %s\n",
          nvrtcGetErrorString(nvrtcAddNameExpression(p, "scale<int>")));
  fprintf(transcript, "  ptx size NULL: %s\n", nvrtcGetErrorString(nvrtcGetPTXSize(p, NULL)));
  fprintf(transcript, "  cubin NULL: %s\n", nvrtcGetErrorString(nvrtcGetCUBIN(p, NULL)));
  fprintf(transcript, "  log size NULL: %s\n",
          nvrtcGetErrorString(nvrtcGetProgramLogSize(p, NULL)));
  fprintf(transcript, "  lowered NULL out: %s\n",
          nvrtcGetErrorString(nvrtcGetLoweredName(p, "scale<float>", NULL)));
  fprintf(transcript, "  lowered NULL expression: %s\n",
          nvrtcGetErrorString(nvrtcGetLoweredName(p, NULL, &lowered)));
  fprintf(transcript, "  pch status: %s\n", nvrtcGetErrorString(nvrtcGetPCHCreateStatus(p)));
  rc = nvrtcGetPCHHeapSizeRequired(p, &size);
  fprintf(transcript, "  pch heap required: %s %zu\n", nvrtcGetErrorString(rc), rc ? 0 : size);
  fprintf(transcript, "  destroy: %s\n", nvrtcGetErrorString(nvrtcDestroyProgram(&p)));
  fprintf(transcript, "  destroy again: %s\n", nvrtcGetErrorString(nvrtcDestroyProgram(&p)));

  for (int code = -1; code <= 20; ++code)
    fprintf(transcript, "error string %d: %s\n", code, nvrtcGetErrorString((nvrtcResult)code));
  int major = 0, minor = 0;
  rc = nvrtcVersion(&major, &minor);
  fprintf(transcript, "version: %s %d.%d\n", nvrtcGetErrorString(rc), major, minor);
  fprintf(transcript, "version NULL: %s\n", nvrtcGetErrorString(nvrtcVersion(NULL, &minor)));
  int n = 0;
  rc = nvrtcGetNumSupportedArchs(&n);
  fprintf(transcript, "supported archs: %s %d\n", nvrtcGetErrorString(rc), n);
  sequences();
}

enum { kThreads = 4 };

static void *compile_in_thread(void *arg) {
  const int i = (int)(size_t)arg;
  char path[4096], case_name[64];
  snprintf(path, sizeof path, "%s/thread%d.txt", outdir, i);
  snprintf(case_name, sizeof case_name, "thread%d", i);
  if (!(transcript = fopen(path, "w"))) {
    perror(path);
    exit(2);
  }
  const char *exprs[] = {"scale<double>"};
  const char *sm90[] = {"-arch=sm_90"};
  run_case(case_name,
           "template <typename T> __global__ void scale(T *x, T a) { x[threadIdx.x] *= a; }\n"
           "// compiled by four threads at once\n",
           "threads.cu", 0, NULL, NULL, exprs, 1, sm90, 1);
  fclose(transcript);
  return NULL;
}

/* Four threads compile the same program at once (NVRTC is thread-safe across programs). */
static void threads(void) {
  pthread_t t[kThreads];
  for (int i = 0; i < kThreads; ++i)
    if (pthread_create(&t[i], NULL, compile_in_thread, (void *)(size_t)i) != 0) exit(2);
  for (int i = 0; i < kThreads; ++i) pthread_join(t[i], NULL);
}

static void dump_maps(const char *path) {
  FILE *in = fopen("/proc/self/maps", "r"), *out = fopen(path, "w");
  if (!in || !out) {
    perror(path);
    exit(2);
  }
  char line[8192];
  while (fgets(line, sizeof line, in))
    if (strstr(line, "nvrtc")) fputs(line, out);
  fclose(in);
  fclose(out);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s kernels|errors|threads|startup OUTDIR INCLUDE_DIR MAPS_FILE\n",
            argv[0]);
    return 2;
  }
  outdir = argv[2];
  char path[4096];
  snprintf(path, sizeof path, "%s/transcript.txt", outdir);
  if (!(transcript = fopen(path, "w"))) {
    perror(path);
    return 2;
  }
  if (strcmp(argv[1], "kernels") == 0)
    kernels(argv[3]);
  else if (strcmp(argv[1], "threads") == 0)
    threads();
  else if (strcmp(argv[1], "startup") == 0)
    startup();
  else
    errors();
  fclose(transcript);
  dump_maps(argv[4]);
  return 0;
}
