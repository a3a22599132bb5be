#include "cuda/driver.hpp"

#include <cuda.h>
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "util/error.hpp"
#include "util/trust.hpp"

namespace progcache {

// Function types spelled out (not taken from cuda.h's macros, which map names to _v2 variants).
struct Driver::Api {
  CUresult (*init)(unsigned int);
  CUresult (*device_get)(CUdevice *, int);
  CUresult (*ctx_get_current)(CUcontext *);
  CUresult (*ctx_set_current)(CUcontext);
  CUresult (*primary_ctx_retain)(CUcontext *, CUdevice);
  CUresult (*module_load_data)(CUmodule *, const void *);
  CUresult (*module_get_function)(CUfunction *, CUmodule, const char *);
  CUresult (*module_unload)(CUmodule);
  CUresult (*error_string)(CUresult, const char **);
  CUresult (*error_name)(CUresult, const char **);
};

void Driver::ApiDelete::operator()(const Api *a) const {
  delete a;
}

std::string Driver::describe(int r) const {
  const char *name = nullptr, *text = nullptr;
  if (api_ && api_->error_name && api_->error_name(CUresult(r), &name) != CUDA_SUCCESS)
    name = nullptr;
  if (api_ && api_->error_string && api_->error_string(CUresult(r), &text) != CUDA_SUCCESS)
    text = nullptr;
  if (!name || !text) {
    // The toolkit's stub driver describes nothing; name the answers cuInit gives without a GPU.
    switch (r) {
      case CUDA_ERROR_STUB_LIBRARY:
        name = "CUDA_ERROR_STUB_LIBRARY";
        text = "the CUDA driver is the toolkit's stub library, not a real driver";
        break;
      case CUDA_ERROR_NO_DEVICE:
        name = "CUDA_ERROR_NO_DEVICE";
        text = "no CUDA-capable device is detected";
        break;
      case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
        name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
        text = "the system driver and the CUDA driver library do not match";
        break;
      default:
        break;
    }
  }
  return std::string(name ? name : "CUDA error " + std::to_string(r)) + ": " +
         (text ? text : "no description from the driver");
}

Driver &Driver::get() {
  static std::once_flag once;
  static Driver *driver = nullptr;
  static std::unique_ptr<Driver> unusable;  // loaded, but cuInit failed: kept for describe()
  static std::string failure;
  std::call_once(once, [] {
    const char *env = trusted_env("PCACHE_LIBCUDA");
    const std::string path = env && *env ? env : "libcuda.so.1";
    void *h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      failure = "no CUDA driver: cannot load '" + path + "': " + (::dlerror() ?: "unknown error") +
                " (set PCACHE_LIBCUDA to the driver library)";
      return;
    }
    auto *api = new Api();
    bool ok = true;
    auto resolve = [&](auto &fn, const char *name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
      if (!fn && ok) {
        ok = false;
        failure = "CUDA driver '" + path + "' lacks " + name;
      }
    };
    resolve(api->init, "cuInit");
    resolve(api->device_get, "cuDeviceGet");
    resolve(api->ctx_get_current, "cuCtxGetCurrent");
    resolve(api->ctx_set_current, "cuCtxSetCurrent");
    resolve(api->primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    resolve(api->module_load_data, "cuModuleLoadData");
    resolve(api->module_get_function, "cuModuleGetFunction");
    resolve(api->module_unload, "cuModuleUnload");
    resolve(api->error_string, "cuGetErrorString");
    resolve(api->error_name, "cuGetErrorName");
    if (!ok) {
      delete api;
      ::dlclose(h);
      return;
    }
    auto d = std::unique_ptr<Driver>(new Driver());
    d->api_.reset(api);
    const CUresult r = api->init(0);
    if (r != CUDA_SUCCESS) {
      failure = "cuInit failed: " + d->describe(r) + " [" + path + "]";
      unusable = std::move(d);
      return;
    }
    driver = d.release();  // lives as long as the process, like the driver itself
  });
  if (!driver) throw Error(Status::cuda_unavailable, failure);
  return *driver;
}

Driver::Load Driver::load_module(ByteView image, void **module, std::string *why) const {
  CUcontext ctx = nullptr;
  CUresult r = api_->ctx_get_current(&ctx);
  if (r != CUDA_SUCCESS) fail("cuCtxGetCurrent", r);
  if (!ctx) {
    CUdevice dev = 0;
    if ((r = api_->device_get(&dev, 0)) != CUDA_SUCCESS) fail("cuDeviceGet", r);
    if ((r = api_->primary_ctx_retain(&ctx, dev)) != CUDA_SUCCESS)
      fail("cuDevicePrimaryCtxRetain", r);
    if ((r = api_->ctx_set_current(ctx)) != CUDA_SUCCESS) fail("cuCtxSetCurrent", r);
  }
  // The driver parses ELF images in place; give it an aligned copy of a misaligned one.
  struct Free {
    void operator()(void *p) const { std::free(p); }
  };
  std::unique_ptr<void, Free> aligned;  // malloc's blocks are 16-byte aligned
  const void *data = image.data;
  if (reinterpret_cast<uintptr_t>(data) % 16 != 0) {
    aligned.reset(std::malloc(image.size ? image.size : 1));
    if (!aligned) throw Error(Status::no_memory, "no memory for an aligned copy of the image");
    std::memcpy(aligned.get(), image.data, image.size);
    data = aligned.get();
  }
  CUmodule m = nullptr;
  r = api_->module_load_data(&m, data);
  if (r == CUDA_SUCCESS) {
    *module = m;
    return Load::loaded;
  }
  if (r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
      r == CUDA_ERROR_INVALID_PTX || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION) {
    if (why) *why = describe(r);
    return Load::image_rejected;
  }
  fail("cuModuleLoadData", r);
}

bool Driver::get_function(void *module, const char *name, void **function) const {
  CUfunction f = nullptr;
  const CUresult r = api_->module_get_function(&f, static_cast<CUmodule>(module), name);
  if (r == CUDA_ERROR_NOT_FOUND) return false;
  if (r != CUDA_SUCCESS) fail("cuModuleGetFunction", r);
  *function = f;
  return true;
}

void Driver::unload(void *module) const {
  const CUresult r = api_->module_unload(static_cast<CUmodule>(module));
  if (r != CUDA_SUCCESS) fail("cuModuleUnload", r);
}

void Driver::fail(const char *call, int result) const {
  throw Error(result == CUDA_ERROR_OUT_OF_MEMORY ? Status::no_memory : Status::cuda,
              std::string(call) + " failed: " + describe(result));
}

}  // namespace progcache
