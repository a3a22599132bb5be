// Scratch directories and whole-file reads and writes for tests, benchmarks and fuzzers: one
// helper instead of one per program.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace testutil {

// A new private directory $TMPDIR/pcache-TAG-XXXXXX (TMPDIR unset: /tmp). Aborts if it cannot
// be made: every caller needs it to run at all.
inline std::string make_scratch_dir(const char *tag) {
  const char *base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/pcache-" + tag + "-XXXXXX";
  if (!::mkdtemp(tmpl.data())) std::abort();
  return tmpl;
}

// Removes dir and everything under it, first giving back the permissions a test may have taken
// away (a read-only cache directory), so that cleanup can proceed. Errors are ignored.
inline void remove_tree(const std::string &dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it);
       it.increment(ec))
    if (it->is_directory(ec) && !it->is_symlink(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  fs::permissions(dir, fs::perms::owner_all, fs::perm_options::add, ec);
  fs::remove_all(dir, ec);
}

// The whole file ("" if it cannot be read).
inline std::string read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces the file's contents with data.
inline void write_file(const std::string &path, const std::string &data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
}

// A scratch directory removed with its contents on destruction.
class TempDir {
 public:
  TempDir() : path_(make_scratch_dir("test")) {}
  ~TempDir() { remove_tree(path_); }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }
  std::string operator/(const std::string &name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace testutil
