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

// nvJitLink called directly: one PTX input (name "k.ptx") to a cubin.
Direct direct_link_ptx(const std::string &ptx, const std::vector<std::string> &options) {
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
  auto size = reinterpret_cast<Size>(::dlsym(h, "nvJitLinkGetLinkedCubinSize"));
  auto get = reinterpret_cast<Get>(::dlsym(h, "nvJitLinkGetLinkedCubin"));
  auto destroy = reinterpret_cast<Destroy>(::dlsym(h, "nvJitLinkDestroy"));
  std::vector<const char *> argv;
  for (const std::string &o : options) argv.push_back(o.c_str());
  void *link = nullptr;
  Direct d;
  d.result = create(&link, uint32_t(argv.size()), argv.data());
  if (d.result == 0) d.result = add(link, 2 /* PTX */, ptx.data(), ptx.size(), "k.ptx");
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
