#include "cuda/nvrtc_identity.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "cuda/elf_file.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/fsutil.hpp"
#include "util/paths.hpp"
#include "util/stat_identity.hpp"

namespace progcache {
namespace {

constexpr std::string_view kBuiltinsPrefix = "libnvrtc-builtins.so.";

// The builtins library libnvrtc dlopens ("libnvrtc-builtins.so.13.0"), read from the file's
// .rodata once per build-id and remembered; "" for an NVRTC that names none.
std::string builtins_soname(const std::string &nvrtc_path, const std::string &build_id,
                            MemoStore *memos) {
  static ForkSafeMutex mutex;
  static std::map<std::string, std::string> memo;
  const std::string memo_name = "nvrtc-builtins-soname/" + build_id;
  {
    std::lock_guard lock(mutex);
    if (auto it = memo.find(build_id); it != memo.end()) return it->second;
  }
  std::optional<std::string> name;
  if (memos) name = memos->load_memo(memo_name);
  if (!name) {
    Fd fd(::open(nvrtc_path.c_str(), O_RDONLY | O_CLOEXEC));
    auto facts = fd ? read_elf_facts(fd.get()) : std::nullopt;
    if (!facts || facts->build_id != build_id) return "";  // replaced meanwhile: decide later
    name = find_rodata_soname(fd.get(), kBuiltinsPrefix).value_or("");
    if (memos) memos->save_memo(memo_name, *name);
  }
  std::lock_guard lock(mutex);
  memo[build_id] = *name;
  return *name;
}

}  // namespace

NvrtcIdentity current_nvrtc_identity(const NvrtcLocation &loc, MemoStore *memos) {
  const auto file_facts = elf_facts_of_file(loc.path);
  if (!file_facts)
    throw Error(Status::cuda_unavailable, "NVRTC '" + loc.path + "' is not a readable ELF library");
  NvrtcIdentity id;
  id.nvrtc_build_id = file_facts->build_id.empty() ? "none" : file_facts->build_id;
  // The builtins library is named inside libnvrtc; the loaded image is read only when it is no
  // longer the file on disk (replaced in place), and then its version names the builtins.
  std::string soname;
  std::shared_ptr<const std::vector<LoadedImage>> images;  // read only where NVRTC is loaded
  if (const Nvrtc *loaded = Nvrtc::find_loaded(loc.path)) {
    images = loaded_images();
    for (const LoadedImage &image : *images) {
      if (image.path != loc.path || image.build_id.empty() || image.build_id == id.nvrtc_build_id)
        continue;
      id.nvrtc_build_id = image.build_id;
      const uint32_t v = loaded->version();
      soname = std::string(kBuiltinsPrefix) + std::to_string(v / 1000) + "." +
               std::to_string(v % 1000 / 10);
    }
  }
  if (soname.empty() && id.nvrtc_build_id == file_facts->build_id)
    soname = builtins_soname(loc.path, file_facts->build_id, memos);
  if (images && !soname.empty())
    for (const LoadedImage &image : *images)
      if (base_name(image.path) == soname) {
        id.builtins_path = image.path;
        id.builtins_build_id = image.build_id.empty() ? "none" : image.build_id;
        return id;
      }
  if (!soname.empty())
    id.builtins_path = predict_dlopen_path(soname, *file_facts, parent_dir(loc.path));
  id.builtins_build_id = "none";
  if (!id.builtins_path.empty())
    if (auto facts = elf_facts_of_file(id.builtins_path); facts && !facts->build_id.empty())
      id.builtins_build_id = facts->build_id;
  return id;
}

}  // namespace progcache
