// Module loading through a fake driver (PCACHE_LIBCUDA is set by CTest for this executable),
// and the "no driver" answers from the real toolkit stub and a missing library.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

const std::string kKernels = read_file(PCACHE_EXAMPLES_DIR "/kernels.cu");

const char *kExprs[] = {"scale_add<float>", "block_sum<float, 256>"};

}  // namespace

TEST(Driver, LoadsARealCubinAndFindsKernelsByNameExpressionAfterAHit) {
  TempDir d;
  Handle c("sqlite:" + (d / "cache.db"));
  const pcache_program p = kernels_program(kKernels, kExprs, 2, PCACHE_TARGET_CUBIN);
  for (int round = 0; round < 2; ++round) {  // a miss, then a hit
    pcache_module *m = nullptr;
    ASSERT_EQ(pcache_load_module(c, &p, &m), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(pcache_compiled_from_cache(pcache_module_compiled(m)), round);
    EXPECT_NE(pcache_module_handle(m), nullptr);
    void *f = nullptr;
    EXPECT_EQ(pcache_module_get_function(m, "scale_add<float>", &f), PCACHE_OK)
        << pcache_last_error();
    EXPECT_NE(f, nullptr);
    EXPECT_EQ(pcache_module_get_function(m, "block_sum<float, 256>", &f), PCACHE_OK);
    EXPECT_EQ(pcache_module_get_function(m, "_Z9scale_addIfEvPT_PKS0_S0_i", &f), PCACHE_OK);
    EXPECT_EQ(pcache_module_get_function(m, "no_such_kernel", &f), PCACHE_NOT_FOUND);
    EXPECT_EQ(pcache_module_unload(m), PCACHE_OK);
  }
  EXPECT_EQ(c.stats().healed, 0u);
}

TEST(Driver, ACachedImageTheDriverRejectsIsRemovedRecompiledAndLoaded) {
  TempDir d;
  Handle c("sqlite:" + (d / "cache.db"));
  const pcache_program p = kernels_program(kKernels, kExprs, 2, PCACHE_TARGET_CUBIN);
  pcache_compiled *r = nullptr;
  ASSERT_EQ(pcache_compile(c, &p, &r), PCACHE_OK) << pcache_last_error();
  const std::string key(reinterpret_cast<const char *>(pcache_compiled_key(r)), PCACHE_KEY_SIZE);
  pcache_compiled_free(r);
  // A well-formed entry whose bytes are not a loadable image (as a stale toolkit's would be).
  ASSERT_EQ(c.put(key, "definitely not a cubin"), PCACHE_OK);
  pcache_module *m = nullptr;
  ASSERT_EQ(pcache_load_module(c, &p, &m), PCACHE_OK) << pcache_last_error();
  void *f = nullptr;
  EXPECT_EQ(pcache_module_get_function(m, "scale_add<float>", &f), PCACHE_OK);
  pcache_module_unload(m);
  EXPECT_EQ(c.stats().healed, 1u);
  pcache_shared_stats shared{};
  shared.struct_size = sizeof shared;
  ASSERT_EQ(pcache_get_shared_stats(c, &shared), PCACHE_OK);
  EXPECT_EQ(shared.healed, 1) << "every process using the cache sees it (since 0.5)";
  std::string v;
  ASSERT_EQ(c.get(key, &v), PCACHE_OK);
  EXPECT_EQ(v.substr(0, 4),
            "\x7f"
            "ELF");  // the entry was replaced by the fresh cubin
}

TEST(Driver, AnImageTheDriverRejectsOnAFreshCompileIsACudaError) {
  Handle c("memory:");
  // PTX is not an ELF image: the fake driver rejects it, as a real one rejects a bad image.
  const pcache_program p = kernels_program(kKernels, kExprs, 2, PCACHE_TARGET_PTX);
  pcache_module *m = nullptr;
  EXPECT_EQ(pcache_load_module(c, &p, &m), PCACHE_ERR_CUDA);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::strstr(pcache_last_error(), "CUDA_ERROR_INVALID_IMAGE"), nullptr)
      << pcache_last_error();
}

// LTO-IR is linked through the cache (nvJitLink, -lto for the program's sm_90) and the cubin
// loaded; kernels are found by name expression. A warm load hits the compile and the link.
TEST(Driver, LtoirIsLinkedThroughTheCacheAndLoaded) {
  TempDir d;
  Handle c("sqlite:" + (d / "cache.db"));
  const pcache_program p = kernels_program(kKernels, kExprs, 2, PCACHE_TARGET_LTOIR);
  for (int round = 0; round < 2; ++round) {
    pcache_module *m = nullptr;
    ASSERT_EQ(pcache_load_module(c, &p, &m), PCACHE_OK) << pcache_last_error();
    const pcache_compiled *linked = pcache_module_compiled(m);
    EXPECT_EQ(pcache_compiled_from_cache(linked), round);
    size_t n = 0;
    const void *data = pcache_compiled_data(linked, &n);
    ASSERT_GE(n, 4u);
    EXPECT_EQ(std::memcmp(data,
                          "\x7f"
                          "ELF",
                          4),
              0)
        << "the linked cubin is loaded";
    void *f = nullptr;
    EXPECT_EQ(pcache_module_get_function(m, "scale_add<float>", &f), PCACHE_OK)
        << pcache_last_error();
    EXPECT_EQ(pcache_module_unload(m), PCACHE_OK);
  }
  EXPECT_EQ(c.count(), 2u) << "the LTO-IR and the linked cubin";
  pcache_program no_arch = p;
  const char *options[] = {"--std=c++17"};
  no_arch.options = options;
  no_arch.num_options = 1;
  pcache_module *m = nullptr;
  EXPECT_EQ(pcache_load_module(c, &no_arch, &m), PCACHE_ERR_INVALID_ARG) << pcache_last_error();
}

// The driver is loaded and initialised once per process. A child forked while another thread is
// in that initialisation must be able to load modules itself, not wait on the parent's: glibc's
// pthread_once, under std::call_once, starts again in a child an initialisation that a fork
// interrupted. ThreadSanitizer replaces pthread_once with one that does not (the child waits
// forever), so the test does not run under it.
TEST(Driver, AForkDuringTheDriversInitialisationLeavesAWorkingChild) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer's pthread_once does not restart in a forked child";
#endif
  // A fresh process: the driver is loaded once per process.
  EXPECT_EQ(run_test_in_fresh_process("Driver.DISABLED_ForkDuringInitChild",
                                      {{"FAKE_CUDA_INIT_MS", "300"}}),
            0);
}

TEST(Driver, DISABLED_ForkDuringInitChild) {  // run only by the test above
  if (!std::getenv("FAKE_CUDA_INIT_MS")) GTEST_SKIP() << "helper of AForkDuringTheDriversInit...";
  TempDir d;
  Handle c("memory:");
  const pcache_program p = kernels_program(kKernels, kExprs, 2, PCACHE_TARGET_CUBIN);
  pcache_compiled *compiled = nullptr;  // compiled first: the module loads below are hits
  ASSERT_EQ(pcache_compile(c, &p, &compiled), PCACHE_OK) << pcache_last_error();
  pcache_compiled_free(compiled);
  auto load = [&] {
    pcache_module *m = nullptr;
    const pcache_status s = pcache_load_module(c, &p, &m);
    if (s == PCACHE_OK) pcache_module_unload(m);
    return s;
  };
  std::thread loader([&] { EXPECT_EQ(load(), PCACHE_OK) << pcache_last_error(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the loader is in cuInit
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(load() == PCACHE_OK ? 0 : 1);
  loader.join();
  const int rc = wait_for_or_kill(pid, std::chrono::seconds(20));
  ASSERT_NE(rc, -1)
      << "the child forked during the driver's initialisation hung (killed after 20 s)";
  EXPECT_EQ(rc, 0);
}

TEST(NoDriver, TheToolkitStubAndAMissingLibraryAreCudaUnavailable) {
  TempDir d;
  const std::string probe =
      std::string(PCACHE_COMPILE_PROBE) + " memory: " PCACHE_EXAMPLES_DIR "/kernels.cu load";
  const std::string stub = run_command("PCACHE_LIBCUDA=" PCACHE_CUDA_STUB " " + probe);
  EXPECT_NE(stub.find("status=-10"), std::string::npos) << stub;
  EXPECT_NE(stub.find("cuInit failed: CUDA_ERROR_STUB_LIBRARY"), std::string::npos) << stub;
  const std::string missing = run_command("PCACHE_LIBCUDA=/nonexistent/libcuda.so.1 " + probe);
  EXPECT_NE(missing.find("status=-10"), std::string::npos) << missing;
  EXPECT_NE(missing.find("/nonexistent/libcuda.so.1"), std::string::npos) << missing;
}
