// Known keys: pcache_make_key of fixed programs must not change by accident. A key is what every
// stored entry is found by (in every cache a team shares, from every language binding), so a
// change of its bytes is a change of key schema: deliberate, under a new schema tag
// (src/core/key.cpp), with docs/keys.md saying what changed and these vectors recomputed
// (a failure prints the keys this build derives).
#include <gtest/gtest.h>
#include <progcache/progcache.h>

#include <string>
#include <vector>

#include "core/key.hpp"
#include "util/hex.hpp"

namespace {

struct Vector {
  const char *what;
  std::string key_hex;
};

std::string key_of(const pcache_program &p) {
  uint8_t key[PCACHE_KEY_SIZE];
  if (pcache_make_key(&p, key) != PCACHE_OK) return std::string("error: ") + pcache_last_error();
  return progcache::to_hex(progcache::ByteView(key, sizeof key));
}

TEST(KeyVectors, FixedProgramsKeepTheirKeys) {
  if (std::string(progcache::key_hash_name()) != "blake2b")
    GTEST_SKIP() << "keys here are SHA-256 (a FIPS provider): the vectors are BLAKE2b's";
  const char *options[] = {"-arch=sm_90", "--std=c++17", "-DN=4"};
  const char *exprs[] = {"k"};
  const char *header_names[] = {"a.h"};
  const char *header_sources[] = {"#define A 1\n"};
  const char *ptx_options[] = {"-arch=sm_90"};
  std::vector<std::pair<const char *, std::string>> keys;

  pcache_program p;
  ASSERT_EQ(pcache_program_init(&p, sizeof p), PCACHE_OK);
  p.name = "k.cu";
  p.source = "extern \"C\" __global__ void k(float *x) { x[0] = N; }\n";
  p.options = options;
  p.num_options = 3;
  p.name_expressions = exprs;
  p.num_name_expressions = 1;
  p.nvrtc_version = 13000;
  keys.emplace_back("C++ to a cubin, options and a name expression", key_of(p));

  pcache_program h = p;
  h.source = "#include \"a.h\"\nextern \"C\" __global__ void k(float *x) { x[0] = A; }\n";
  h.header_names = header_names;
  h.header_sources = header_sources;
  h.num_headers = 1;
  h.target = PCACHE_TARGET_PTX;
  keys.emplace_back("C++ to PTX, an in-memory header", key_of(h));

  pcache_program e = p;
  e.extra_digest = "abc";
  e.extra_digest_size = 3;
  keys.emplace_back("C++ with an extra digest", key_of(e));

  pcache_program x;
  ASSERT_EQ(pcache_program_init(&x, sizeof x), PCACHE_OK);
  x.code_type = PCACHE_CODE_PTX;
  x.target = PCACHE_TARGET_CUBIN;
  x.source = ".version 8.0\n.target sm_90\n.address_size 64\n";
  x.options = ptx_options;
  x.num_options = 1;
  keys.emplace_back("PTX to a cubin", key_of(x));

  const std::vector<std::string> expected = {
      // Schema 5 (0.5): the program's fields, then its source, in one digest.
      "9e0caf1dfbcf2a30c62fe7fc53f35ceb3ed2393c0afd55ce0010ee35d36b27e6",
      "545876195daa98bf69b824744d050b79a7e58cafb6077ffcb6429d3e9e89bd9b",
      "cb0238868996b051160bd59bece221f2b89d3d7b4ba25c483a370f2475f683f6",
      "a632ccb643827c3d6a2b4d74507c9e2dabd8328bba581d7d4e89130e193da4de",
  };
  std::string derived;
  for (const auto &[what, key] : keys) derived += "  \"" + key + "\",  // " + what + "\n";
  ASSERT_EQ(keys.size(), expected.size());
  for (size_t i = 0; i < keys.size(); ++i)
    EXPECT_EQ(keys[i].second, expected[i]) << keys[i].first << "; this build derives:\n" << derived;
}

}  // namespace
