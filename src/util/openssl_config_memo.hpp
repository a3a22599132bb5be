// Whether OpenSSL's configuration file matters (util/openssl_init.hpp), remembered across
// processes: finding out parses the file on a thread of its own, ~150 us of every fresh
// process's first key (docs/performance.md), and the file rarely changes.
#pragma once

#include <optional>
#include <string>

namespace progcache {

class OpensslConfigMemo {
 public:
  // file: the configuration file OpenSSL would load; openssl_version: OpenSSL_version_num() of
  // the library that parses it. The memo is a file in the user's cache directory
  // ($XDG_CACHE_HOME/progcache, else ~/.cache/progcache), named by a digest of the OpenSSL
  // version, the path and the file's text, so an edited file or another OpenSSL is another
  // memo. There is none (recall() answers nothing, remember() writes nothing) in a privileged
  // process and for a file that cannot be read whole or is over 1 MiB.
  OpensslConfigMemo(const char *file, unsigned long openssl_version);

  // The verdict remembered for this exact text, if a memo holds one: a regular file owned by
  // this user (or root), writable by no one else, in a directory that is the same, holding
  // "load\n" or "skip\n". The text is not scanned here: only remember() writes memos, and only
  // for texts that depend on nothing else (a fresh process's recall costs a read and a digest).
  std::optional<bool> recall() const;

  // Writes the verdict (a temporary file renamed into place, so a reader sees all of it or
  // none), creating the directory (0700) if need be, unless the text's meaning depends on more
  // than itself: an `include` (other files) or `ENV::` (the environment) outside a comment, or
  // a line continued by a backslash; those are parsed by every process. Failures are ignored:
  // the verdict is then found again by the next process. Temporary files that writers killed
  // before their rename left behind (named by a pid that no longer exists) are removed first.
  void remember(bool matters) const;

  // The memo's path, "" when there is none. For tests.
  const std::string &path() const { return path_; }

 private:
  std::string dir_, path_, text_;
};

}  // namespace progcache
