// progcache run: runs a command with the drop-in NVRTC in front of the real one
// (docs/transparent.md). The command replaces this process (exec), so its exit status is ours.
#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "commands.hpp"

namespace progcache::cli {
namespace {

// The drop-in libraries (libnvrtc.so.N) in dir, or none.
std::vector<std::string> dropins_in(const std::string &dir) {
  std::vector<std::string> found;
  DIR *d = ::opendir(dir.c_str());
  if (!d) return found;
  while (const dirent *e = ::readdir(d))
    if (std::strncmp(e->d_name, "libnvrtc.so.", 12) == 0) found.push_back(dir + "/" + e->d_name);
  ::closedir(d);
  return found;
}

// Where the drop-in is beside the libprogcache this command runs with: <libdir>/progcache/nvrtc
// when installed, nvrtc-dropin/ in a build tree.
std::string dropin_directory() {
  Dl_info info{};
  if (!::dladdr(reinterpret_cast<void *>(&pcache_open), &info) || !info.dli_fname)
    throw Failure(PCACHE_ERR_IO, "cannot tell where libprogcache is loaded from");
  char real[PATH_MAX];  // the loader's spelling may hold "bin/../lib" (RUNPATH $ORIGIN/../lib)
  std::string libdir = ::realpath(info.dli_fname, real) ? real : info.dli_fname;
  libdir.erase(libdir.rfind('/') == std::string::npos ? 0 : libdir.rfind('/'));
  if (libdir.empty()) libdir = ".";
  for (const char *sub : {"/progcache/nvrtc", "/nvrtc-dropin"})
    if (!dropins_in(libdir + sub).empty()) return libdir + sub;
  throw Failure(PCACHE_ERR_CUDA_UNAVAILABLE,
                "no drop-in NVRTC in " + libdir + "/progcache/nvrtc (is progcache installed?)");
}

void prepend_env(const char *name, const std::string &value, char separator) {
  const char *old = std::getenv(name);
  const std::string now = old && *old ? value + separator + old : value;
  ::setenv(name, now.c_str(), 1);
}

}  // namespace

int cmd_run(Invocation &in) {
  if (in.passthrough.empty()) throw Usage("run needs a command after --; see progcache run --help");
  const std::string dir = dropin_directory();
  prepend_env("LD_LIBRARY_PATH", dir, ':');
  if (in.has("preload"))
    for (const std::string &lib : dropins_in(dir)) prepend_env("LD_PRELOAD", lib, ' ');
  // The cache the command's compiles go through must be usable now: a typo would otherwise run
  // the whole command uncached without a word. Its paths are made absolute first: the command
  // may change directory before it compiles.
  std::string uri = in.uri;
  if (!uri.empty()) {
    size_t size = 0;
    pcache_admin_absolute_uri(uri.c_str(), nullptr, &size);
    std::string absolute(size, '\0');
    check(pcache_admin_absolute_uri(uri.c_str(), absolute.data(), &size));
    uri = absolute.c_str();
  }
  pcache *cache = nullptr;
  if (pcache_open(uri.empty() ? nullptr : uri.c_str(), nullptr, &cache) != PCACHE_OK)
    throw Failure(PCACHE_ERR_INVALID_ARG,
                  "run: no usable cache (" + library_message() + "); the command was not run");
  pcache_close(cache);
  if (!uri.empty()) ::setenv("PCACHE_URI", uri.c_str(), 1);
  std::vector<char *> argv;
  for (std::string &a : in.passthrough) argv.push_back(a.data());
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  const int error = errno;
  std::fprintf(stderr, "progcache: run: cannot run %s: %s\n", argv[0], std::strerror(error));
  return error == ENOENT ? 127 : 126;  // as a shell reports it
}

}  // namespace progcache::cli
