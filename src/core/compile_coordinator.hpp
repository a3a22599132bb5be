// Single flight beyond this process, for one cache: the processes sharing a store take striped
// file locks in the directory beside it, and the machines sharing a store with leases (Redis)
// take a lease on the key. Storage offers the place and the leases; the policy lives here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "backends/backend.hpp"
#include "core/key.hpp"
#include "util/fsutil.hpp"

namespace progcache {

class CompileCoordinator {
 public:
  // lock_dir: where processes sharing the store take locks ("" = private to this process);
  // leases: the store's lease capability, or null. Neither is owned.
  // modes: what the lock directory and files are created with (a shared cache's processes
  // belong to several users).
  CompileCoordinator(std::string lock_dir, LeaseStore *leases, CreateModes modes = {})
      : lock_dir_(std::move(lock_dir)), leases_(leases), modes_(modes) {}

  // Held while this process compiles a key: one of kStripes files under the lock directory,
  // locked with flock. Not holding it after the timeout (or at all, for a read-only or private
  // store) is allowed: the caller then compiles itself.
  class ProcessLock {
   public:
    ProcessLock(const std::string &dir, const Key &key, uint32_t timeout_ms, CreateModes modes);
    ~ProcessLock();
    ProcessLock(const ProcessLock &) = delete;
    ProcessLock &operator=(const ProcessLock &) = delete;

   private:
    Fd fd_;
    bool held_ = false;
  };
  [[nodiscard]] ProcessLock lock_processes(const Key &key, uint32_t timeout_ms) const {
    return ProcessLock(lock_dir_, key, timeout_ms, modes_);
  }

  // A lease on compiling key across machines, released when destroyed.
  class Lease {
   public:
    Lease(LeaseStore &store, ByteView key, std::string token)
        : store_(store), key_(key), token_(std::move(token)) {}
    ~Lease();
    Lease(const Lease &) = delete;
    Lease &operator=(const Lease &) = delete;

   private:
    LeaseStore &store_;
    ByteView key_;
    std::string token_;
  };
  enum class LeaseAnswer { taken, held_elsewhere, unavailable };
  // Tries to take the lease on key; *token receives it when taken. unavailable: the store keeps
  // no leases, or failed (the caller compiles without waiting for anyone).
  [[nodiscard]] LeaseAnswer try_lease(ByteView key, std::string *token) const;
  [[nodiscard]] Lease hold(ByteView key, std::string token) const {
    return Lease(*leases_, key, std::move(token));
  }

  static constexpr int kStripes = 1024;

 private:
  std::string lock_dir_;
  LeaseStore *leases_;
  CreateModes modes_;
};

}  // namespace progcache
