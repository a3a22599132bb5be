// Path text, composed the way the C library and NVRTC compose it (no file system access).
#pragma once

#include <string>
#include <string_view>

namespace progcache {

// dir + "/" + name, without doubling a slash; name alone when dir is empty.
inline std::string join_path(std::string_view dir, std::string_view name) {
  std::string out(dir);
  if (!out.empty() && out.back() != '/') out += '/';
  out += name;
  return out;
}

// The prefix NVRTC puts before a name included from beside path: "sub/" for "sub/k.cu", ""
// for "k.cu" (then the name is taken from the working directory).
inline std::string dir_part(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? std::string() : std::string(path.substr(0, slash + 1));
}

// The last component: "k.cu" for "sub/k.cu".
inline std::string base_name(std::string_view path) {
  const size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// The directory holding path, as a directory name: "sub" for "sub/k.cu", "." for "k.cu", "/"
// for "/k.cu" (trailing slashes of path ignored).
std::string parent_dir(const std::string &path);

}  // namespace progcache
