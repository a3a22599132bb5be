// PTX (nvJitLink) and NVVM IR (libNVVM) through pcache_compile, against the libraries called
// directly: cold and warm, every result equals the direct call's bytes and status, a changed
// input, option or module order misses, a refusal answers with the library's log and is not
// stored, and a hit maps neither library. The direct calls are written here from the libraries'
// headers, not through progcache's wrappers.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <progcache/progcache.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "differential.hpp"
#include "proc_util.hpp"
#include "test_util.hpp"

using difftest::Outcome;
using difftest::Source;
using testutil::Handle;
using testutil::TempDir;

namespace {

constexpr const char *kToolkit = "/usr/local/cuda";

std::string toolkit_file(const std::string &rel) {
  return std::string(kToolkit) + "/" + rel;
}

std::string slurp(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Direct {
  int result = 0;
  std::string bytes;
};

struct Input {
  int kind;  // PCACHE_INPUT_*, which is nvJitLink's input type less one
  std::string name, bytes;
};

// nvJitLink called directly: inputs in order, to a cubin or (ptx) PTX.
Direct direct_link(const std::vector<Input> &inputs, const std::vector<std::string> &options,
                   bool ptx = false) {
  void *h = ::dlopen(toolkit_file("lib64/libnvJitLink.so.13").c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << ::dlerror();
  using Create = int (*)(void **, uint32_t, const char **);
  using AddData = int (*)(void *, int, const void *, size_t, const char *);
  using Complete = int (*)(void *);
  using Size = int (*)(void *, size_t *);
  using Get = int (*)(void *, void *);
  using Destroy = int (*)(void **);
  auto create = reinterpret_cast<Create>(::dlsym(h, "nvJitLinkCreate"));
  auto add = reinterpret_cast<AddData>(::dlsym(h, "nvJitLinkAddData"));
  auto complete = reinterpret_cast<Complete>(::dlsym(h, "nvJitLinkComplete"));
  auto size = reinterpret_cast<Size>(
      ::dlsym(h, ptx ? "nvJitLinkGetLinkedPtxSize" : "nvJitLinkGetLinkedCubinSize"));
  auto get =
      reinterpret_cast<Get>(::dlsym(h, ptx ? "nvJitLinkGetLinkedPtx" : "nvJitLinkGetLinkedCubin"));
  auto destroy = reinterpret_cast<Destroy>(::dlsym(h, "nvJitLinkDestroy"));
  std::vector<const char *> argv;
  for (const std::string &o : options) argv.push_back(o.c_str());
  void *link = nullptr;
  Direct d;
  d.result = create(&link, uint32_t(argv.size()), argv.data());
  for (const Input &in : inputs)
    if (d.result == 0)
      d.result = add(link, in.kind + 1, in.bytes.data(), in.bytes.size(), in.name.c_str());
  if (d.result == 0) d.result = complete(link);
  size_t n = 0;
  if (d.result == 0) d.result = size(link, &n);
  if (d.result == 0) {
    d.bytes.assign(n, '\0');
    d.result = get(link, d.bytes.data());
  }
  if (link) destroy(&link);
  return d;
}

Direct direct_link_ptx(const std::string &ptx, const std::vector<std::string> &options) {
  return direct_link({{PCACHE_INPUT_PTX, "k.ptx", ptx}}, options);
}

// libNVVM called directly.
Direct direct_nvvm(const std::vector<std::pair<std::string, std::string>> &modules,
                   const std::string &libdevice, const std::vector<std::string> &options) {
  void *h = ::dlopen(toolkit_file("lib64/libnvvm.so.4").c_str(), RTLD_NOW | RTLD_LOCAL);
  EXPECT_NE(h, nullptr) << ::dlerror();
  using Create = int (*)(void **);
  using Add = int (*)(void *, const char *, size_t, const char *);
  using Compile = int (*)(void *, int, const char **);
  using Size = int (*)(void *, size_t *);
  using Get = int (*)(void *, char *);
  using Destroy = int (*)(void **);
  auto create = reinterpret_cast<Create>(::dlsym(h, "nvvmCreateProgram"));
  auto add = reinterpret_cast<Add>(::dlsym(h, "nvvmAddModuleToProgram"));
  auto lazy = reinterpret_cast<Add>(::dlsym(h, "nvvmLazyAddModuleToProgram"));
  auto compile = reinterpret_cast<Compile>(::dlsym(h, "nvvmCompileProgram"));
  auto size = reinterpret_cast<Size>(::dlsym(h, "nvvmGetCompiledResultSize"));
  auto get = reinterpret_cast<Get>(::dlsym(h, "nvvmGetCompiledResult"));
  auto destroy = reinterpret_cast<Destroy>(::dlsym(h, "nvvmDestroyProgram"));
  void *p = nullptr;
  Direct d;
  d.result = create(&p);
  for (const auto &[name, bytes] : modules)
    if (d.result == 0) d.result = add(p, bytes.data(), bytes.size(), name.c_str());
  if (d.result == 0 && !libdevice.empty())
    d.result = lazy(p, libdevice.data(), libdevice.size(), "libdevice");
  std::vector<const char *> argv;
  for (const std::string &o : options) argv.push_back(o.c_str());
  if (d.result == 0) d.result = compile(p, int(argv.size()), argv.data());
  size_t n = 0;
  if (d.result == 0) d.result = size(p, &n);
  if (d.result == 0) {
    d.bytes.assign(n, '\0');
    d.result = get(p, d.bytes.data());
  }
  if (p) destroy(&p);
  return d;
}

// A kernel's PTX, from NVRTC through the cache.
std::string kernel_ptx(int factor) {
  Source s;
  s.text =
      "extern \"C\" __global__ void scale(float *x) { x[threadIdx.x] *= " + std::to_string(factor) +
      ".0f; }\n";
  s.target = PCACHE_TARGET_PTX;
  const Outcome o = difftest::compile(nullptr, s);
  EXPECT_EQ(o.status, PCACHE_OK) << o.log;
  return o.bytes;
}

Source ptx_program(const std::string &ptx, std::vector<std::string> options = {"-arch=sm_90"}) {
  Source s;
  s.name = "k.ptx";
  s.text = ptx;
  s.code_type = PCACHE_CODE_PTX;
  s.options = std::move(options);
  return s;
}

// NVVM IR as libNVVM 2.0 reads it (LLVM 7 syntax, typed pointers). The kernel calls expf from
// libdevice, and `helper` from a second module when asked.
std::string kernel_ir(bool call_helper) {
  const std::string body = call_helper ? "  %e = call float @helper(float %v)\n"
                                       : "  %e = call float @__nv_expf(float %v)\n";
  return "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:"
         "128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
         "target triple = \"nvptx64-nvidia-cuda\"\n\n"
         "define void @scale(float* %a, float %s) {\n"
         "entry:\n"
         "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
         "  %idx = zext i32 %tid to i64\n"
         "  %p = getelementptr float, float* %a, i64 %idx\n"
         "  %v = load float, float* %p\n" +
         body +
         "  %r = fmul float %e, %s\n"
         "  store float %r, float* %p\n"
         "  ret void\n}\n\n"
         "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
         "declare float @__nv_expf(float)\n"
         "declare float @helper(float)\n\n"
         "!nvvm.annotations = !{!0}\n"
         "!0 = !{void (float*, float)* @scale, !\"kernel\", i32 1}\n"
         "!nvvmir.version = !{!1}\n"
         "!1 = !{i32 2, i32 0}\n";
}

std::string helper_ir(float add) {
  return "target datalayout = \"e-p:64:64:64-i1:8:8-i8:8:8-i16:16:16-i32:32:32-i64:64:64-i128:"
         "128:128-f32:32:32-f64:64:64-v16:16:16-v32:32:32-v64:64:64-v128:128:128-n16:32:64\"\n"
         "target triple = \"nvptx64-nvidia-cuda\"\n\n"
         "define float @helper(float %x) {\n"
         "  %r = fadd float %x, " +
         std::to_string(add) +
         "\n  ret float %r\n}\n\n"
         "!nvvmir.version = !{!0}\n"
         "!0 = !{i32 2, i32 0}\n";
}

Source nvvm_program(std::vector<std::string> options, bool call_helper = false) {
  Source s;
  s.name = "k.ll";
  s.text = kernel_ir(call_helper);
  s.code_type = PCACHE_CODE_NVVM;
  s.target = PCACHE_TARGET_PTX;
  s.options = std::move(options);
  return s;
}

class Jit : public ::testing::Test {
 public:
  TempDir d;
  Handle cache{"sqlite:" + (d / "cache.db")};

  // Cold (a miss), warm (a hit), and without a cache: all three the direct call's outcome.
  void cold_warm_equal(const Source &s, const Direct &want, const char *what) {
    const Outcome cold = difftest::compile(cache, s);
    ASSERT_EQ(want.result, 0) << what << ": the direct call failed";
    EXPECT_EQ(cold.status, PCACHE_OK) << what << ": " << cold.warning << cold.log;
    EXPECT_FALSE(cold.from_cache) << what;
    EXPECT_TRUE(cold.bytes == want.bytes)
        << what << ": cold " << cold.bytes.size() << " bytes, " << want.bytes.size() << " direct";
    const Outcome warm = difftest::compile(cache, s);
    EXPECT_TRUE(warm.from_cache) << what << ": " << warm.warning;
    EXPECT_TRUE(warm.bytes == want.bytes) << what << ": the hit differs";
    const Outcome none = difftest::compile(nullptr, s);
    EXPECT_TRUE(none.bytes == want.bytes) << what << ": without a cache";
  }
};

}  // namespace

TEST_F(Jit, PtxCompilesToTheCubinNvJitLinkLinks) {
  const std::string ptx = kernel_ptx(3);
  cold_warm_equal(ptx_program(ptx), direct_link_ptx(ptx, {"-arch=sm_90"}), "PTX");
  // Another option, another PTX: other entries.
  cold_warm_equal(ptx_program(ptx, {"-arch=sm_90", "-lineinfo"}),
                  direct_link_ptx(ptx, {"-arch=sm_90", "-lineinfo"}), "PTX -lineinfo");
  const std::string other = kernel_ptx(4);
  cold_warm_equal(ptx_program(other), direct_link_ptx(other, {"-arch=sm_90"}), "other PTX");
  EXPECT_EQ(cache.count(), 3u);
}

TEST_F(Jit, NvvmIrCompilesToWhatLibNvvmGives) {
  const std::string libdevice = slurp(toolkit_file("nvvm/libdevice/libdevice.10.bc"));
  ASSERT_FALSE(libdevice.empty());
  const std::string ir = kernel_ir(false);
  cold_warm_equal(nvvm_program({"-arch=compute_90"}),
                  direct_nvvm({{"k.ll", ir}}, "", {"-arch=compute_90"}), "NVVM IR");
  cold_warm_equal(nvvm_program({"-arch=compute_90", "-use-libdevice"}),
                  direct_nvvm({{"k.ll", ir}}, libdevice, {"-arch=compute_90"}), "with libdevice");
  Source lto = nvvm_program({"-arch=compute_90", "-use-libdevice"});
  lto.target = PCACHE_TARGET_LTOIR;
  cold_warm_equal(lto, direct_nvvm({{"k.ll", ir}}, libdevice, {"-arch=compute_90", "-gen-lto"}),
                  "to LTO-IR");
  // Two modules: the kernel calls the second one's helper; its content is keyed.
  for (float add : {1.0f, 2.0f}) {
    Source two = nvvm_program({"-arch=compute_90"}, true);
    two.headers = {{"helper.ll", helper_ir(add)}};
    cold_warm_equal(two,
                    direct_nvvm({{"k.ll", kernel_ir(true)}, {"helper.ll", helper_ir(add)}}, "",
                                {"-arch=compute_90"}),
                    "two modules");
  }
  EXPECT_EQ(cache.count(), 5u);
}

// A module given as bitcode (NULs inside, sizes in header_sizes): libdevice itself, as an
// ordinary module.
TEST_F(Jit, BitcodeModulesArePassedWhole) {
  const std::string libdevice = slurp(toolkit_file("nvvm/libdevice/libdevice.10.bc"));
  ASSERT_NE(libdevice.find('\0'), std::string::npos);
  Source s = nvvm_program({"-arch=compute_90"});
  s.headers = {{"libdevice", libdevice}};
  const Direct want =
      direct_nvvm({{"k.ll", kernel_ir(false)}, {"libdevice", libdevice}}, "", {"-arch=compute_90"});
  cold_warm_equal(s, want, "bitcode module");
}

TEST_F(Jit, ARefusalAnswersWithTheLibrarysLogAndIsNotStored) {
  Source bad = ptx_program(".version 9.0\n.target sm_90\nthis is not PTX\n");
  const Outcome o = difftest::compile(cache, bad);
  EXPECT_EQ(o.status, PCACHE_ERR_COMPILE);
  EXPECT_NE(o.log.find("nvJitLink"), std::string::npos) << o.log;
  Source bad_ir = nvvm_program({"-arch=compute_90"});
  bad_ir.text = "define void @broken( {\n";
  const Outcome ir = difftest::compile(cache, bad_ir);
  EXPECT_EQ(ir.status, PCACHE_ERR_COMPILE);
  EXPECT_NE(ir.log.find("nvvm"), std::string::npos) << ir.log;
  Source bad_option = nvvm_program({"-arch=compute_90", "-no-such-option"});
  EXPECT_EQ(difftest::compile(cache, bad_option).status, PCACHE_ERR_COMPILE);
  EXPECT_EQ(cache.count(), 0u);
}

TEST_F(Jit, TargetsEachLibraryCannotMakeAreRefused) {
  Source ptx_to_ptx = ptx_program(kernel_ptx(3));
  ptx_to_ptx.target = PCACHE_TARGET_PTX;
  EXPECT_EQ(difftest::compile(cache, ptx_to_ptx).status, PCACHE_ERR_INVALID_ARG);
  Source ir_to_cubin = nvvm_program({"-arch=compute_90"});
  ir_to_cubin.target = PCACHE_TARGET_CUBIN;
  EXPECT_EQ(difftest::compile(cache, ir_to_cubin).status, PCACHE_ERR_INVALID_ARG);
}

// A warm process answers from the cache without mapping nvJitLink or libNVVM: a fresh process
// (this test binary run again for JitWarm.DISABLED_Process), since a forked child would inherit
// what this one has loaded.
TEST_F(Jit, AHitMapsNeitherLibrary) {
  const std::string ptx = kernel_ptx(5);
  ASSERT_EQ(difftest::compile(cache, ptx_program(ptx)).status, PCACHE_OK);
  ASSERT_EQ(difftest::compile(cache, nvvm_program({"-arch=compute_90", "-use-libdevice"})).status,
            PCACHE_OK);
  testutil::write_file(d / "k.ptx", ptx);
  const std::string uri = "sqlite:" + (d / "cache.db"), ptx_path = d / "k.ptx";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("PCACHE_TEST_WARM_URI", uri.c_str(), 1);
    ::setenv("PCACHE_TEST_WARM_PTX", ptx_path.c_str(), 1);
    ::execl("/proc/self/exe", "self", "--gtest_filter=JitWarm.DISABLED_Process",
            "--gtest_also_run_disabled_tests", nullptr);
    ::_exit(127);
  }
  EXPECT_EQ(testutil::wait_for(pid), 0);
}

TEST(JitWarm, DISABLED_Process) {  // run only by AHitMapsNeitherLibrary
  const char *uri = std::getenv("PCACHE_TEST_WARM_URI");
  if (!uri) GTEST_SKIP() << "helper of AHitMapsNeitherLibrary";
  Handle warm(uri);
  EXPECT_TRUE(
      difftest::compile(warm, ptx_program(slurp(std::getenv("PCACHE_TEST_WARM_PTX")))).from_cache);
  EXPECT_TRUE(
      difftest::compile(warm, nvvm_program({"-arch=compute_90", "-use-libdevice"})).from_cache);
  const std::string maps = slurp("/proc/self/maps");
  EXPECT_EQ(maps.find("libnvJitLink"), std::string::npos);
  EXPECT_EQ(maps.find("libnvvm"), std::string::npos);
}

namespace {

// NVRTC's output for a module, through no cache.
std::string nvrtc_output(const std::string &source, int32_t target,
                         std::vector<std::string> options) {
  Source s;
  s.text = source;
  s.target = target;
  s.options = std::move(options);
  const Outcome o = difftest::compile(nullptr, s);
  EXPECT_EQ(o.status, PCACHE_OK) << o.log;
  return o.bytes;
}

const char *const kHelperCu = "extern \"C\" __device__ float twice(float x) { return 2.0f * x; }\n";
const char *const kKernelCu =
    "extern \"C\" __device__ float twice(float x);\n"
    "extern \"C\" __global__ void run(float *v) { v[threadIdx.x] = twice(v[threadIdx.x]); }\n";

Outcome link(pcache *cache, const std::vector<Input> &inputs, std::vector<std::string> options,
             int32_t target = PCACHE_TARGET_CUBIN) {
  std::vector<pcache_link_input> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    in[i].struct_size = sizeof in[i];
    in[i].kind = inputs[i].kind;
    in[i].name = inputs[i].name.c_str();
    in[i].data = inputs[i].bytes.data();
    in[i].size = inputs[i].bytes.size();
  }
  std::vector<const char *> opts;
  for (const std::string &o : options) opts.push_back(o.c_str());
  pcache_link_job job;
  EXPECT_EQ(pcache_link_job_init(&job, sizeof job), PCACHE_OK);
  job.target = target;
  job.options = opts.data();
  job.num_options = opts.size();
  job.inputs = in.data();
  job.num_inputs = in.size();
  pcache_compiled *r = nullptr;
  Outcome o;
  o.status = pcache_link(cache, &job, &r);
  o.warning = pcache_last_error();
  if (r) {
    size_t n = 0;
    const void *data = pcache_compiled_data(r, &n);
    o.bytes.assign(static_cast<const char *>(data), n);
    o.from_cache = pcache_compiled_from_cache(r) != 0;
    o.log = pcache_compiled_log(r);
  }
  pcache_compiled_free(r);
  return o;
}

class Link : public Jit {
 public:
  void cold_warm_equal(const std::vector<Input> &inputs, const std::vector<std::string> &options,
                       const char *what, int32_t target = PCACHE_TARGET_CUBIN) {
    std::vector<std::string> direct_options = options;
    if (target == PCACHE_TARGET_PTX) direct_options.push_back("-ptx");  // as cuda.core's Linker
    const Direct want = direct_link(inputs, direct_options, target == PCACHE_TARGET_PTX);
    ASSERT_EQ(want.result, 0) << what << ": the direct link failed";
    const Outcome cold = link(cache, inputs, options, target);
    EXPECT_EQ(cold.status, PCACHE_OK) << what << ": " << cold.warning << cold.log;
    EXPECT_FALSE(cold.from_cache) << what;
    EXPECT_TRUE(cold.bytes == want.bytes)
        << what << ": cold " << cold.bytes.size() << " bytes, " << want.bytes.size() << " direct";
    const Outcome warm = link(cache, inputs, options, target);
    EXPECT_TRUE(warm.from_cache) << what << ": " << warm.warning;
    EXPECT_TRUE(warm.bytes == want.bytes) << what << ": the hit differs";
    EXPECT_TRUE(link(nullptr, inputs, options, target).bytes == want.bytes) << what;
  }
};

}  // namespace

// LTO-IR from NVRTC -dlto, two modules, one calling the other (cuda.core's Linker with LTO).
TEST_F(Link, LtoIrOfTwoModulesLinksAsNvJitLinkLinksIt) {
  const std::vector<std::string> dlto = {"-arch=sm_90", "-dlto", "-rdc=true"};
  const std::string helper = nvrtc_output(kHelperCu, PCACHE_TARGET_LTOIR, dlto);
  const std::string kernel = nvrtc_output(kKernelCu, PCACHE_TARGET_LTOIR, dlto);
  const std::vector<Input> inputs = {{PCACHE_INPUT_LTOIR, "kernel.ltoir", kernel},
                                     {PCACHE_INPUT_LTOIR, "helper.ltoir", helper}};
  cold_warm_equal(inputs, {"-arch=sm_90", "-lto"}, "LTO");
  cold_warm_equal(inputs, {"-arch=sm_90", "-lto", "-O0"}, "LTO -O0");
  cold_warm_equal(inputs, {"-arch=sm_90", "-lto"}, "LTO to PTX", PCACHE_TARGET_PTX);
  // A changed input is another link.
  const std::string helper3 =
      nvrtc_output("extern \"C\" __device__ float twice(float x) { return 3.0f * x; }\n",
                   PCACHE_TARGET_LTOIR, dlto);
  cold_warm_equal({inputs[0], {PCACHE_INPUT_LTOIR, "helper.ltoir", helper3}},
                  {"-arch=sm_90", "-lto"}, "changed input");
  EXPECT_EQ(cache.count(), 4u);
}

TEST_F(Link, PtxWithACubinLinks) {
  const std::vector<std::string> rdc = {"-arch=sm_90", "-rdc=true"};
  const std::string helper = nvrtc_output(kHelperCu, PCACHE_TARGET_CUBIN, rdc);
  const std::string kernel = nvrtc_output(kKernelCu, PCACHE_TARGET_PTX, rdc);
  cold_warm_equal(
      {{PCACHE_INPUT_PTX, "kernel.ptx", kernel}, {PCACHE_INPUT_CUBIN, "helper.cubin", helper}},
      {"-arch=sm_90"}, "PTX + cubin");
}

// A fatbin made by the toolkit's fatbinary from the helper's cubin.
TEST_F(Link, AFatbinLinks) {
  const std::string fatbinary = toolkit_file("bin/fatbinary");
  if (::access(fatbinary.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << fatbinary;
  const std::vector<std::string> rdc = {"-arch=sm_90", "-rdc=true"};
  testutil::write_file(d / "helper.cubin", nvrtc_output(kHelperCu, PCACHE_TARGET_CUBIN, rdc));
  const std::string cmd = fatbinary + " --create=" + (d / "helper.fatbin") +
                          " --image3=kind=elf,sm=90,file=" + (d / "helper.cubin") + " 2>&1";
  testutil::run_command(cmd);
  const std::string fatbin = slurp(d / "helper.fatbin");
  ASSERT_FALSE(fatbin.empty()) << cmd;
  const std::string kernel = nvrtc_output(kKernelCu, PCACHE_TARGET_PTX, rdc);
  cold_warm_equal(
      {{PCACHE_INPUT_PTX, "kernel.ptx", kernel}, {PCACHE_INPUT_FATBIN, "helper.fatbin", fatbin}},
      {"-arch=sm_90"}, "PTX + fatbin");
}

TEST_F(Link, ARefusedLinkAnswersWithNvJitLinksLogAndStoresNothing) {
  const std::string kernel =
      nvrtc_output(kKernelCu, PCACHE_TARGET_PTX, {"-arch=sm_90", "-rdc=true"});
  const Outcome o = link(cache, {{PCACHE_INPUT_PTX, "kernel.ptx", kernel}}, {"-arch=sm_90"});
  EXPECT_EQ(o.status, PCACHE_ERR_COMPILE) << "twice is undefined";
  EXPECT_NE(o.log.find("twice"), std::string::npos) << o.log;
  EXPECT_NE(o.warning.find("nvJitLink"), std::string::npos) << o.warning;
  EXPECT_EQ(cache.count(), 0u);
}

TEST_F(Link, BadJobsAreRefused) {
  pcache_compiled *r = nullptr;
  EXPECT_EQ(pcache_link(cache, nullptr, &r), PCACHE_ERR_INVALID_ARG);
  pcache_link_job job;
  ASSERT_EQ(pcache_link_job_init(&job, sizeof job), PCACHE_OK);
  EXPECT_EQ(pcache_link(cache, &job, &r), PCACHE_ERR_INVALID_ARG) << "no inputs";
  pcache_link_input in[2]{};
  in[0].struct_size = in[1].struct_size = sizeof in[0];
  in[0].kind = in[1].kind = PCACHE_INPUT_PTX;
  in[0].data = in[1].data = "x";
  in[0].size = in[1].size = 1;
  job.inputs = in;
  job.num_inputs = 2;
  in[1].kind = 9;
  EXPECT_EQ(pcache_link(cache, &job, &r), PCACHE_ERR_INVALID_ARG) << pcache_last_error();
  in[1].kind = PCACHE_INPUT_PTX;
  in[1].struct_size = 24;
  EXPECT_EQ(pcache_link(cache, &job, &r), PCACHE_ERR_INVALID_ARG) << "differing struct sizes";
  in[1].struct_size = sizeof in[1];
  in[1].data = nullptr;
  EXPECT_EQ(pcache_link(cache, &job, &r), PCACHE_ERR_INVALID_ARG) << "NULL data";
  in[1].data = "x";
  job.target = PCACHE_TARGET_LTOIR;
  EXPECT_EQ(pcache_link(cache, &job, &r), PCACHE_ERR_INVALID_ARG) << "a link makes no LTO-IR";
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(pcache_link_job_init(&job, 16), PCACHE_ERR_INVALID_ARG);
}
