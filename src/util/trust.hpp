// Who may write a cache, and what a privileged process may use (docs/security.md).
#pragma once

#include <sys/stat.h>

#include <optional>
#include <string>

#include "util/env.hpp"

namespace progcache {

// True in a setuid/setgid (AT_SECURE) process, or in a test build with PCACHE_TEST_FAKE_SECURE=1
// (util/test_hooks.hpp: it can only make the library stricter).
bool process_is_privileged();

// Refuses (Error(permission), saying why and how to allow it), unless allow_shared: a cache
// directory owned by another user or writable by group or others (sticky or not: others could
// still create files in it), or one with an ancestor owned by another user (not root) or
// writable by others without the sticky bit. fd may be -1 (then path is stat'ed).
void check_private_dir(const std::string &path, int fd, bool allow_shared);

// The same for a cache file that already exists: a regular file owned by this user (or root),
// writable by no one else. A missing file passes (it will be created ours). A FIFO, device,
// socket or symbolic link is refused with Error(invalid_arg) even when shared: it is no one's
// cache file, and a link is never followed.
void check_owned_file(const std::string &path, bool allow_shared);

// Owned by this user or root, and writable by neither group nor others.
bool owned_and_private(const struct stat &st);

// The secret in the file the secret_file setting names ($PCACHE_SECRET_FILE, else the config
// files: util/settings.hpp), or nullopt if none is set. A private cache's secret is this user's
// (or root's) and readable by no one else (0600). A shared cache's (team mode) may be any team
// member's and readable by the group (0640: chgrp team, so that every member can sign and
// verify), never writable by the group nor readable by others. Throws Error(permission/io)
// otherwise, or if the file cannot be read; Error(invalid_arg) if it is empty (after a trailing
// line end) or larger than kMaxSecretFileSize. A guessable one is used and warned of
// (warn_if_guessable_secret).
std::optional<std::string> configured_secret(bool shared);

// Below this many bytes a secret can be found by trying guesses against any entry it signed
// (the MAC is cheap to compute): such a secret still signs and verifies, with a thread warning
// that names `what` and says how to make a good one. Not refused: a cache that stopped working
// on upgrade over a short secret would fail the builds it exists to speed up.
inline constexpr size_t kMinSecretSize = 16;
inline constexpr size_t kMaxSecretFileSize = 1 << 20;
void warn_if_guessable_secret(size_t size, const std::string &what);

}  // namespace progcache
