// Bundles: every entry of a cache in one portable file, to ship a warmed cache to machines that
// cannot reach a shared one (progcache export / import).
//
//   offset  size  field
//   0       8     magic "PCBUNDLE"
//   8       4     bundle format version (2; 1 is read too), little-endian
//   12      4     reserved (0)
//   16      ...   records: u64 record length, then the record in the entry format (entry.hpp),
//                 payload zstd-compressed where that helps, signed when the exporting cache has
//                 a secret. Entries first, then (format 2) the manifests of observations their
//                 compiles are filed under, as records whose key is "\0progcache-memo\0" and
//                 the memo's name (core/observation.hpp): without them an imported compile
//                 would never be found
//   end     16    u64 0 (no record is empty), then u64 the number of records
//
// Every record carries its own key, metadata and checksum, so an importer verifies each one on
// its own (and its MAC, when the importing cache has a secret) and a damaged record costs only
// itself. The end marker tells a complete bundle from a truncated one.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "core/cache.hpp"

namespace progcache {

struct BundleProgress {
  uint64_t entries = 0;   // written, or imported
  uint64_t bytes = 0;     // payload bytes
  uint64_t rejected = 0;  // import: records that failed verification (not stored)
  uint64_t file_bytes = 0;
};

// Writes every entry of cache to path ("-" = standard output) through a temporary file renamed
// into place. progress is called about once a second while it runs. Throws Error.
BundleProgress export_bundle(Cache &cache, const std::string &path,
                             const std::function<void(const BundleProgress &)> &progress);

// Verifies and stores every record of the bundle at path ("-" = standard input). Records that
// fail verification are skipped, counted and described through reject(reason). Throws Error
// (corrupt) for a file that is not a bundle or ends early, after storing what came before.
BundleProgress import_bundle(Cache &cache, const std::string &path,
                             const std::function<void(const BundleProgress &)> &progress,
                             const std::function<void(const std::string &)> &reject);
// The same from an open stream (name is for messages).
BundleProgress import_bundle_stream(Cache &cache, FILE *in, const std::string &name,
                                    const std::function<void(const BundleProgress &)> &progress,
                                    const std::function<void(const std::string &)> &reject);

}  // namespace progcache
