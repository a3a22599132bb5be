// The CUDA driver, opened with dlopen at run time: libcuda.so.1, or $PCACHE_LIBCUDA.
#pragma once

#include <memory>
#include <string>

#include "util/blob.hpp"

namespace progcache {

class Driver {
 public:
  // Loads the driver and calls cuInit(0) once per process (thread-safe). Throws
  // Error(cuda_unavailable) with the driver's own message when there is no usable driver
  // (no library, the toolkit's stub, no device).
  static Driver &get();

  // cuModuleLoadData into the calling thread's current context, or device 0's primary context
  // (made current) when the thread has none; *module on success. image_rejected: this driver
  // cannot load this image (a stale or damaged cached binary), *why says how. Throws
  // Error(cuda) naming the driver's error for any other failure, Error(no_memory).
  enum class Load { loaded, image_rejected };
  [[nodiscard]] Load load_module(ByteView image, void **module, std::string *why) const;
  // The kernel called name; false when the module has none. Throws Error(cuda) otherwise.
  [[nodiscard]] bool get_function(void *module, const char *name, void **function) const;
  // Throws Error(cuda).
  void unload(void *module) const;

 private:
  // "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid"
  std::string describe(int result) const;
  [[noreturn]] void fail(const char *call, int result) const;
  Driver() = default;
  struct Api;
  struct ApiDelete {
    void operator()(const Api *a) const;
  };
  std::unique_ptr<const Api, ApiDelete> api_;
};

}  // namespace progcache
