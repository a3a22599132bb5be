// What NVRTC was seen to do during a compile: every file it opened or probed, every variable of
// the environment it read, the working directory and the time it asked for. NVRTC's imports of
// those C library functions are redirected (cuda/elf_imports.hpp) to recorders that log each
// call and then make it as before, so the compile itself is unchanged (docs/keys.md, "Observing
// NVRTC"). This layer records; src/core/observation.cpp decides what the records mean.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace progcache {

// One query NVRTC made, with the answer it got.
struct NvrtcEvent {
  enum class Kind : uint8_t {
    stat,       // stat/__xstat/access...: path -> exists?, which file
    lstat,      // lstat/__lxstat: the same without following a last symlink
    access,     // access(path, mode): 0 or errno (mode in `mode`)
    read,       // opened for reading: path -> which file (content kept when it just changed)
    write,      // opened for writing, created, removed: a side effect
    list,       // opendir: the directory's names
    resolve,    // realpath / readlink: path -> the text answered
    env,        // getenv: name -> value (or unset)
    cwd,        // getcwd: the text answered
    time_text,  // ctime / strftime: the text answered (what __DATE__/__TIME__ are made of)
  };
  Kind kind = Kind::stat;
  std::string path;           // the path or variable name, as NVRTC gave it
  int error = 0;              // 0: it succeeded; else the errno it got
  int mode = 0;               // access(): the mode asked; stat/read: the file type bits (S_IFMT)
  uint64_t dev = 0, ino = 0;  // the file found (stat, lstat, read)
  // read: size, mtime and ctime in ns as fstat saw the descriptor (to notice a change later)
  uint64_t size = 0;
  int64_t mtime_ns = 0, ctime_ns = 0;
  bool has_text = false;  // env: set; resolve/cwd/time_text: an answer
  std::string text;       // env value, resolved path, directory, time text; read: content when racy
  bool content_kept = false;  // read: `text` holds the bytes NVRTC could read (a racy file)
  bool changed = false;       // the same query got another answer later in the compile
};

// The events of one compile, in the order NVRTC made them: each distinct query once, with its
// first answer (and `changed` set when a later answer differed).
class NvrtcObservation {
 public:
  // Appends e unless the same query was seen; safe from NVRTC's own threads.
  void add(const NvrtcEvent &e);
  // Marks the observation unusable (a call that cannot be accounted for); the first reason wins.
  void mark_incomplete(const std::string &why);
  // Copies of what was recorded, for the thread that owns the compile once it has ended.
  std::vector<NvrtcEvent> events() const;
  std::string incomplete() const;
  bool saw_compiler() const;  // NVRTC's front end ran (it asks for the time when it starts)

 private:
  mutable std::mutex mutex_;
  std::vector<NvrtcEvent> events_;
  std::unordered_map<std::string, size_t> index_;  // the query (kind, mode, path) -> events_
  std::string incomplete_;
  bool saw_time_ = false;
};

// Redirects the imports of the NVRTC library at path, and of every other loaded libnvrtc*
// object (its builtins, a real NVRTC behind a forwarding one) that is not a progcache front end,
// to the recorders; once per object per process, thread-safe. Returns "" when every such object
// is observed, else why not (an object whose imports cannot be rewritten, or that imports a
// function this code neither records nor knows to be harmless).
std::string observe_nvrtc_library(const std::string &path);

// While alive, the calls of the NVRTC library at nvrtc_path (and of every loaded libnvrtc*
// object, see observe_nvrtc_library) made on this thread are recorded into observation; calls
// from threads
// that no scope claims (NVRTC's own workers, or another program's) are recorded into every live
// scope's observation, so concurrent compiles see at most a superset of their own calls.
// At the end, libnvrtc* objects that NVRTC loaded meanwhile are redirected too, and the
// observation is marked incomplete if one of them imports a recorded function (its calls
// during this compile went unseen).
class ObservationScope {
 public:
  ObservationScope(NvrtcObservation *observation, const std::string &nvrtc_path);
  ~ObservationScope();
  ObservationScope(const ObservationScope &) = delete;
  ObservationScope &operator=(const ObservationScope &) = delete;

 private:
  NvrtcObservation *observation_;
  NvrtcObservation *outer_;
};

// The C library functions the recorders replace, and those allowed through unrecorded because
// their answers cannot depend on files, the environment or the time (tests check that NVRTC
// imports nothing outside both lists).
const std::vector<std::string> &recorded_functions();
bool is_harmless_import(const std::string &name);

}  // namespace progcache
