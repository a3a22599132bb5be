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
  // (made current) when the thread has none. Returns the CUresult; *module on success.
  int load_module(ByteView image, void **module) const;
  int get_function(void *module, const char *name, void **function) const;
  int unload(void *module) const;
  // "CUDA_ERROR_INVALID_IMAGE: device kernel image is invalid"
  std::string describe(int result) const;

  // Results that mean "this image is not loadable here" (a stale or damaged cached binary).
  static bool is_image_rejection(int result);

 private:
  Driver() = default;
  struct Api;
  struct ApiDelete {
    void operator()(const Api *a) const;
  };
  std::unique_ptr<const Api, ApiDelete> api_;
};

}  // namespace progcache
