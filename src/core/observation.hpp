// What a compile's output depends on, as NVRTC was seen to use it (cuda/nvrtc_observer.hpp):
// the files it read (their digests), the paths it probed and what it found there, which paths
// were one file, the variables it read, and the program name and directories where the output
// holds them. A compile is keyed by its program and this observation, as ccache's depend mode
// keys what the compiler reports (docs/keys.md, "Observing NVRTC").
//
// Observations are filed by the program's identity (core/key.hpp: identity_key) in a manifest
// kept among the cache's memos. A later lookup re-asks each recorded question (stat, open, ...):
// when every answer is the same, NVRTC would read the same bytes and make the same output, and
// the observation's key is the entry's key.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/key.hpp"
#include "core/source_facts.hpp"
#include "cuda/nvrtc_observer.hpp"
#include "util/blob.hpp"
#include "util/memo_store.hpp"
#include "util/stat_identity.hpp"

namespace progcache {

// Where a compile happens: what relative paths and the program name mean there.
struct CompileSetting {
  std::string name;                // the program name
  std::string name_dir;            // its directory ("" for a bare name), without a final slash
  std::string cwd;                 // getcwd()
  std::optional<std::string> pwd;  // $PWD (NVRTC prefers it when it names the same directory)
};
CompileSetting current_setting(const ProgramDesc &program);

// One question NVRTC asked, with its answer.
struct ObservedQuery {
  NvrtcEvent::Kind kind = NvrtcEvent::Kind::stat;  // stat, lstat, access, read, list, resolve
  std::string path;  // as NVRTC gave it, or a setting placeholder (name, name_dir, cwd, pwd)
  int32_t mode = 0;  // access: the mode asked
  int32_t error = 0;
  int32_t file_type = 0;   // S_IFMT bits of what was found
  int32_t same_as = -1;    // the first earlier query that found the same file, or -1
  ContentDigest digest{};  // read: the content
  std::string text;        // resolve: the answer; list: a digest of the names
  StatIdentity stat;       // read: the file as it was then (a hint for re-checking; not keyed)
};

struct Observation {
  std::vector<ObservedQuery> queries;
  std::vector<std::pair<std::string, std::optional<std::string>>> environment;  // sorted
  // The setting, kept only where it decides the output (else empty and not compared).
  bool name_matters = false;  // the output holds the name, or NVRTC used the name's file
  std::string name;
  bool name_dir_matters = false;  // NVRTC looked for headers beside the name
  std::string name_dir;
  bool dirs_matter = false;  // the output holds the working directory
  std::string cwd;
  std::optional<std::string> pwd;
};

// The lexical facts of the program's own texts: its source, in-memory headers and options.
SourceFacts program_lexical_facts(const ProgramDesc &program);

// A recording turned into an observation, or why the compile must not be stored.
struct Interpretation {
  std::optional<Observation> observation;
  std::string not_stored;  // "" when observation is set
};

// What a compile of program, in setting, that recorded `recorded` and produced output and log
// (ok: NVRTC succeeded) depends on. Not storable when the recording is incomplete, NVRTC wrote
// files, a file it read changed meanwhile, or the output can hold the time of the compile.
Interpretation interpret(const NvrtcObservation &recorded, const ProgramDesc &program,
                         const CompileSetting &setting, MemoStore *memos, ByteView output,
                         std::string_view log, bool ok);

// Asks every question again in setting: true when each answer is the one recorded (a read file
// by its digest, checked through its stat where that vouches for it). Otherwise false, with
// *why (may be null) saying the first difference.
bool holds(const Observation &observation, const CompileSetting &setting, MemoStore *memos,
           std::string *why);

// The observation as key fields (derive_key), in a form that names no inode or time: paths,
// answers, digests, which queries found one file. with_shown: also each field's display text
// (key_fields, explain); a key alone reads none of it.
std::vector<KeyField> observation_fields(const Observation &observation, bool with_shown = true);

// The dependencies an observation lists, for `progcache deps`: (path, found).
std::vector<std::pair<std::string, bool>> observed_paths(const Observation &observation,
                                                         const CompileSetting &setting);

// The entry keys derived from a manifest's observations (derive_key of a program with the
// observation's fields), by index, as the first hit of each derived them, for observations
// filed without their key (Manifest::keys). A manifest is filed under its programs' identity, of
// which every other part of such a key is a function (identity_key walks the same fields but
// these), so one key per observation serves every program that finds the manifest. A copy
// starts empty: it may be changed. Thread-safe.
class DerivedKeys {
 public:
  DerivedKeys() = default;
  DerivedKeys(const DerivedKeys &) {}
  DerivedKeys &operator=(const DerivedKeys &other);
  std::optional<Key> find(size_t index) const;
  void remember(size_t index, const Key &key) const;

 private:
  mutable std::vector<std::optional<Key>> keys_;  // guarded by a process-wide lock
};

// The observations filed under one identity, newest first, each with the key of the entry its
// compile was stored under, where the manifest holds it: a fresh process's hit then derives no
// key, and needs no digest at all when its identity came from a memo (core/identity_memo.hpp).
// keys has observations' size (unset for an observation filed without it: an older manifest).
struct Manifest {
  std::vector<Observation> observations;
  std::vector<std::optional<Key>> keys;
  DerivedKeys derived_keys;

  // observations[index]'s key, stored or derived by this process, if known.
  std::optional<Key> key_of(size_t index) const;
};
inline constexpr size_t kMaxObservations = 16;

std::string encode_manifest(const Manifest &manifest);
std::optional<Manifest> decode_manifest(std::string_view text);

// The manifest of identity, from this process's copy or the memos (fresh: the memos always).
std::shared_ptr<const Manifest> load_manifest(MemoStore *memos, const Key &identity, bool fresh);
// The memo name of identity's manifest ("observed/<hex>").
std::string manifest_name(const Key &identity);
// Merges an encoded manifest (from a bundle) into the one stored under name, the stored ones
// first. False, storing nothing, when name is not a manifest's or text does not decode.
bool merge_manifest(MemoStore *memos, std::string_view name, std::string_view text);

// Files observation first in identity's manifest, with key, the key its compile's entry was
// stored under (dropping an equal one and the oldest past kMaxObservations). Best effort, as
// memos are.
void add_observation(MemoStore *memos, const Key &identity, const Observation &observation,
                     const Key &key);

}  // namespace progcache
