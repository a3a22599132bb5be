// The regular files this process has opened for reading, by path and stat identity, so that a
// hit's re-check of what NVRTC read (core/observation.cpp: holds) asks the file system one stat a
// header instead of a stat, an open, an fstat and a close (docs/keys.md, "Observing NVRTC").
//
// Whether open(2) can read a file is decided by the path's directories (search permission, which
// the stat needs too), the file's mode, owner, group and ACLs, and the caller's credentials. A
// change to the file's mode, owner or ACL moves its ctime, which is part of its stat identity,
// and a credential change empties the memo; so a file whose stat still shows the identity it had
// when this process opened it, and which had settled by then (not racy: no second change can
// hide within the file system's timestamp granularity), still opens. What the memo cannot see is
// a security module's policy, or a fanotify permission listener, that starts refusing an
// unchanged file while the process runs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "util/stat_identity.hpp"

namespace progcache {

// What decides whether this process may open a file: its file-system user and group, its
// supplementary groups and its effective capabilities (root without CAP_DAC_OVERRIDE reads only
// what its mode allows).
struct AccessCredentials {
  uint32_t fsuid = 0, fsgid = 0;
  std::vector<uint32_t> groups;
  uint64_t effective_capabilities = 0;
  // False when the groups or the capabilities could not be read (a sandbox, a setgroups racing
  // the read): such a snapshot vouches for nothing and records nothing.
  bool complete = true;
  // Four system calls (setfsuid, setfsgid, getgroups, capget); two more for over 64
  // supplementary groups. The file-system ids are the effective ones where a sandbox refuses
  // setfsuid/setfsgid (they follow the effective ids).
  static AccessCredentials current();
  bool operator==(const AccessCredentials &) const = default;
};

// True when this process opened path for reading under `credentials` (complete) while the file
// there had the identity `now` has, and that identity had settled. Thread-safe.
bool opened_before(const std::string &path, const StatIdentity &now,
                   const AccessCredentials &credentials);
// Records that path opened for reading, under credentials, as the file `opened` (its fstat).
// Nothing is kept for a racy identity or incomplete credentials. Other credentials than the memo's
// empty it first: they may open less. Thread-safe; bounded (emptied when full).
void remember_opened(const std::string &path, const StatIdentity &opened,
                     const AccessCredentials &credentials);

}  // namespace progcache
