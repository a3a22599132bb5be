// The identity memo (src/core/identity_memo.hpp) and the keys manifests file with their
// observations: what lets a fresh process's hit run without a digest. The memo is sound only if
// equal encodings mean equal identities and a recall believes nothing but the exact bytes.
#include "core/identity_memo.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/cache.hpp"
#include "core/compile.hpp"
#include "core/key.hpp"
#include "core/observation.hpp"
#include "test_util.hpp"

namespace {

using progcache::ByteView;
using progcache::FoundIdentity;
using progcache::Key;
using progcache::KeyContext;
using progcache::KeyField;
using progcache::ProgramDesc;

class MapMemos : public progcache::MemoStore {
 public:
  std::optional<std::string> load_memo(std::string_view name) override {
    const auto it = memos.find(std::string(name));
    if (it == memos.end()) return std::nullopt;
    return it->second;
  }
  void save_memo(std::string_view name, std::string_view value) override {
    memos[std::string(name)] = std::string(value);
  }
  std::map<std::string, std::string> memos;
};

struct Variant {
  std::string what;
  std::string source = "__global__ void k(int *x) { *x = 1; }";
  std::vector<std::string> options{"-arch=sm_90"};
  std::string header_name, header_text;
  std::string name_expression;
  std::string extra_digest;
  std::string build = "nvrtc build A";
  std::string tmpdir = "unset";
  std::string program_name = "k.cu";

  ProgramDesc program() const {
    ProgramDesc p;
    p.name = program_name;
    p.source = ByteView(source);
    for (const std::string &o : options) p.options.push_back(o);
    if (!header_name.empty()) p.headers.emplace_back(header_name, header_text);
    if (!name_expression.empty()) p.name_expressions.push_back(name_expression);
    if (!extra_digest.empty()) p.extra_digest = ByteView(extra_digest);
    return p;
  }
  KeyContext context() const {
    KeyContext c;
    c.nvrtc_build = build;
    c.name_in_identity = false;
    KeyField f;
    f.tag = progcache::kFieldEnvironment;
    f.name = "nvrtc env TMPDIR";
    f.value = tmpdir;
    c.environment.push_back(f);
    return c;
  }
};

std::vector<Variant> variants() {
  std::vector<Variant> v(1);
  v[0].what = "base";
  auto add = [&](std::string what, auto change) {
    Variant x = v[0];
    x.what = std::move(what);
    change(x);
    v.push_back(x);
  };
  add("a source byte", [](Variant &x) { x.source[27] = '2'; });
  add("a longer source", [](Variant &x) { x.source += " "; });
  // Tag-and-length fields: a byte moved from one field to the next makes another encoding.
  add("an option a byte longer and one more option", [](Variant &x) {
    x.options = {"-arch=sm_90_", "-DX"};
  });
  add("an option", [](Variant &x) { x.options = {"-arch=sm_80"}; });
  add("an option spelled otherwise, same meaning", [](Variant &x) {
    x.options = {"-arch", "sm_90"};
  });
  add("an in-memory header", [](Variant &x) {
    x.header_name = "h.h";
    x.header_text = "#define A 1";
  });
  add("another header text", [](Variant &x) {
    x.header_name = "h.h";
    x.header_text = "#define A 2";
  });
  add("a name expression", [](Variant &x) { x.name_expression = "k"; });
  add("an extra digest", [](Variant &x) { x.extra_digest = "0123"; });
  add("the NVRTC build", [](Variant &x) { x.build = "nvrtc build B"; });
  add("a variable NVRTC reads", [](Variant &x) { x.tmpdir = "=/scratch"; });
  // Not in the identity: the name is keyed through observations, where the output holds it.
  add("the program name", [](Variant &x) { x.program_name = "other.cu"; });
  return v;
}

}  // namespace

TEST(IdentityMemo, EqualEncodingsAreExactlyEqualIdentities) {
  const std::vector<Variant> v = variants();
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = 0; j < v.size(); ++j) {
      const ProgramDesc a = v[i].program(), b = v[j].program();
      const bool same_encoding = progcache::identity_encoding(a, v[i].context()) ==
                                 progcache::identity_encoding(b, v[j].context());
      const bool same_identity =
          progcache::identity_key(a, v[i].context()) == progcache::identity_key(b, v[j].context());
      EXPECT_EQ(same_encoding, same_identity) << v[i].what << " / " << v[j].what;
      if (i != j && v[i].what != "base" && v[j].what != "base") continue;
      // Each change from the base moves both or neither, and only the name and a spelling of
      // the same option move neither.
      const bool neutral = v[i].what == "the program name" || v[j].what == "the program name" ||
                           v[i].what.find("spelled otherwise") != std::string::npos ||
                           v[j].what.find("spelled otherwise") != std::string::npos;
      EXPECT_EQ(same_identity, i == j || neutral) << v[i].what << " / " << v[j].what;
    }
}

// The same over random programs from a small alphabet, short enough that many are equal and
// many differ by a byte moved from one field to the next (an option's end to the next option, a
// header's name to its text, the last field to the source).
TEST(IdentityMemo, RandomProgramsHaveEqualEncodingsExactlyWhenTheirIdentitiesAreEqual) {
  std::mt19937 rng(20261202);
  auto text = [&](size_t max) {
    std::string t(rng() % (max + 1), 'a');
    for (char &c : t) c = "ab-="[rng() % 4];
    return t;
  };
  std::vector<Variant> v(400);
  for (Variant &x : v) {
    x.source = text(3);
    x.options = {"-DM" + text(2)};
    if (rng() % 2) x.options.push_back("-DN" + text(2));
    if (rng() % 2) {
      x.header_name = text(2) + ".h";
      x.header_text = text(2);
    }
    if (rng() % 3 == 0) x.name_expression = text(2);
    if (rng() % 3 == 0) x.extra_digest = text(2);
    x.tmpdir = rng() % 2 ? "unset" : "=" + text(1);
  }
  size_t equal = 0;
  for (size_t i = 0; i < v.size(); ++i)
    for (size_t j = i + 1; j < v.size(); ++j) {
      const ProgramDesc a = v[i].program(), b = v[j].program();
      const bool same_encoding = progcache::identity_encoding(a, v[i].context()) ==
                                 progcache::identity_encoding(b, v[j].context());
      const bool same_identity =
          progcache::identity_key(a, v[i].context()) == progcache::identity_key(b, v[j].context());
      ASSERT_EQ(same_encoding, same_identity) << i << " / " << j;
      equal += same_identity;
    }
  EXPECT_GT(equal, 0u);  // the test saw equal programs, not only different ones
}

// Every field has its length, the source too: a program whose list of variables is one shorter
// must not encode as another whose source begins with the missing variable's field (with the
// source's raw bytes appended after the last field, the two encodings were equal).
TEST(IdentityMemo, NoFieldCanBeCarriedInTheSource) {
  Variant shorter, longer;
  shorter.source = longer.source = "";
  const KeyContext one = shorter.context();
  KeyContext two = one;
  KeyField f;
  f.tag = progcache::kFieldEnvironment;
  f.name = "nvrtc env NVRTC";
  f.value = "unset";
  two.environment.push_back(f);
  // The bytes the second variable's field adds to the encoding.
  const std::string without = progcache::identity_encoding(shorter.program(), one);
  const std::string with = progcache::identity_encoding(longer.program(), two);
  ASSERT_GT(with.size(), without.size());
  size_t common = 0;
  while (common < without.size() && without[common] == with[common]) ++common;
  const std::string added = with.substr(common, with.size() - without.size());
  shorter.source = added + "s";
  longer.source = "s";
  EXPECT_NE(progcache::identity_encoding(shorter.program(), one),
            progcache::identity_encoding(longer.program(), two));
  EXPECT_NE(progcache::identity_key(shorter.program(), one),
            progcache::identity_key(longer.program(), two));
}

TEST(IdentityMemo, ARecallBelievesOnlyTheProgramsOwnBytes) {
  const std::vector<Variant> v = variants();
  const Variant &base = v[0], &other = v[1];  // differ in one source byte, same length
  const Key identity = progcache::identity_key(base.program(), base.context());
  MapMemos memos;
  EXPECT_FALSE(progcache::recall_identity(&memos, base.program(), base.context()));
  progcache::remember_identity(&memos, base.program(), base.context(), identity);
  ASSERT_EQ(memos.memos.size(), 1u);
  const std::string name = memos.memos.begin()->first, record = memos.memos.begin()->second;
  EXPECT_EQ(name.rfind("identity/", 0), 0u) << name;
  EXPECT_EQ(progcache::recall_identity(&memos, base.program(), base.context()), identity);
  for (const Variant &x : v) {
    if (x.what == "base" || x.what == "the program name" ||
        x.what.find("spelled otherwise") != std::string::npos)
      continue;
    EXPECT_FALSE(progcache::recall_identity(&memos, x.program(), x.context())) << x.what;
  }

  // The base's record filed under the other program's name (a hash collision, or a writer of
  // the store): the other program is not given the base's identity.
  MapMemos planted;
  progcache::remember_identity(&planted, other.program(), other.context(), identity);
  ASSERT_EQ(planted.memos.size(), 1u);
  const std::string other_name = planted.memos.begin()->first;
  planted.memos[other_name] = record;
  EXPECT_FALSE(progcache::recall_identity(&planted, other.program(), other.context()));

  // Damage the store's own checks would not see (a record that is well formed as an entry).
  auto recalled_after = [&](std::string damaged) {
    MapMemos m;
    m.memos[name] = std::move(damaged);
    return progcache::recall_identity(&m, base.program(), base.context());
  };
  EXPECT_FALSE(recalled_after(record.substr(0, record.size() - 1)));  // an encoding cut short
  EXPECT_FALSE(recalled_after(record + "x"));                         // one byte more
  EXPECT_FALSE(recalled_after(""));
  std::string wrong_magic = record;
  wrong_magic[3] ^= 1;
  EXPECT_FALSE(recalled_after(wrong_magic));
  std::string wrong_schema = record;
  wrong_schema[4 + 4 + 2] ^= 1;  // magic, the schema's length, then its text
  EXPECT_FALSE(recalled_after(wrong_schema));
  std::string wrong_length = record;
  wrong_length[4] ^= 0x40;  // the schema's length
  EXPECT_FALSE(recalled_after(wrong_length));
  // A flipped bit of the identity is believed (nothing in the record can tell it from another
  // identity): the store's checksum is what stands between rot and a recall.
  std::string other_identity = record;
  const size_t encoding_size = progcache::identity_encoding(base.program(), base.context()).size();
  other_identity[other_identity.size() - encoding_size - 1] ^= 1;
  EXPECT_TRUE(recalled_after(other_identity));
}

TEST(IdentityMemo, LargeProgramsAndOtherCodeTypesAreNotMemoised) {
  Variant big;
  big.source.assign(progcache::kMaxIdentityMemoBytes + 1, ' ');
  MapMemos memos;
  const Key identity = progcache::identity_key(big.program(), big.context());
  progcache::remember_identity(&memos, big.program(), big.context(), identity);
  EXPECT_TRUE(memos.memos.empty());
  // PTX and NVVM IR are keyed in one digest, with no observation: nothing to memoise.
  Variant ptx;
  ProgramDesc ptx_program = ptx.program();
  ptx_program.code_type = progcache::CodeType::ptx;
  progcache::remember_identity(&memos, ptx_program, ptx.context(),
                               progcache::identity_key(ptx_program, ptx.context()));
  EXPECT_TRUE(memos.memos.empty());
  // Just inside the bound, its fields included.
  Variant fits;
  fits.source.assign(progcache::kMaxIdentityMemoBytes - 2048, ' ');
  progcache::remember_identity(&memos, fits.program(), fits.context(),
                               progcache::identity_key(fits.program(), fits.context()));
  EXPECT_EQ(memos.memos.size(), 1u);
  // A process with its digest at hand (this one has hashed) hashes, looking for no memo.
  const FoundIdentity found = progcache::find_identity(&memos, fits.program(), fits.context());
  EXPECT_EQ(found.from, FoundIdentity::From::digest);
  EXPECT_EQ(found.identity, progcache::identity_key(fits.program(), fits.context()));
  EXPECT_TRUE(progcache::key_hash_at_hand());
}

TEST(ManifestKeys, AManifestFilesEachObservationsKeyAndOldManifestsStillRead) {
  progcache::Observation a, b;
  a.environment.emplace_back("A", "1");
  b.environment.emplace_back("B", std::nullopt);
  Key ka{}, kb{};
  ka.fill(0xa1);
  kb.fill(0xb2);
  MapMemos memos;
  Key identity{};
  identity.fill(7);
  progcache::add_observation(&memos, identity, a, ka);
  progcache::add_observation(&memos, identity, b, kb);  // filed first, a kept behind it
  const std::string text = memos.memos.at(progcache::manifest_name(identity));
  const auto m = progcache::decode_manifest(text);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->observations.size(), 2u);
  EXPECT_EQ(m->key_of(0), kb);
  EXPECT_EQ(m->key_of(1), ka);
  EXPECT_EQ(progcache::encode_manifest(*m), text);  // and kept through a copy

  // A manifest of progcache before its keys ("PCO2": observations alone) reads, keyless.
  progcache::Manifest keyless;
  keyless.observations = {a};
  keyless.keys = {std::nullopt};
  std::string old = progcache::encode_manifest(keyless);
  ASSERT_EQ(old.substr(0, 4), "PCO3");
  ASSERT_EQ(old.back(), '\0');  // the one observation's "no key"
  old = "PCO2" + old.substr(4, old.size() - 5);
  const auto read = progcache::decode_manifest(old);
  ASSERT_TRUE(read);
  ASSERT_EQ(read->observations.size(), 1u);
  EXPECT_FALSE(read->key_of(0));
  // A key's flag must be 0 or 1, and its bytes all there.
  std::string bad_flag = progcache::encode_manifest(keyless);
  bad_flag.back() = 2;
  EXPECT_FALSE(progcache::decode_manifest(bad_flag));
  EXPECT_FALSE(progcache::decode_manifest(text.substr(0, text.size() - 1)));
}

// A stored compile leaves its identity's memo where a later process can read it, and nowhere
// else: not in a memory cache (no other process reads its memos), nor in a signed one (its
// processes load libcrypto for the MACs, so a memo would spare them nothing).
TEST(IdentityMemo, AStoredCompileLeavesItsMemoOnlyWhereALaterProcessCanUseIt) {
  testutil::TempDir d;
  const std::string source = "__global__ void k(int *x) { *x = 7; }";
  ProgramDesc program;
  program.name = "k.cu";
  program.source = ByteView(source);
  program.options = {"-arch=sm_90"};
  for (const auto &[uri, secret, kept] :
       {std::tuple{"sqlite:" + (d / "c.db"), "", true},
        std::tuple{"filestream:" + (d / "fs"), "", true},
        std::tuple{std::string("memory:"), "", false},
        std::tuple{"tiered:memory:|sqlite:" + (d / "t.db"), "", true},
        std::tuple{"sqlite:" + (d / "signed.db"), "a secret of some length", false}}) {
    SCOPED_TRACE(uri);
    progcache::CacheOptions o;
    if (*secret) o.secret = secret;
    const auto cache = progcache::Cache::open(uri, o);
    const auto r = progcache::compile_through_cache(cache.get(), program, {});
    ASSERT_EQ(r->status, progcache::Status::ok);
    ASSERT_TRUE(r->not_stored.empty()) << r->not_stored;
    const progcache::PreparedCompile prepared = progcache::prepare_compile(cache.get(), program);
    const std::optional<Key> memo =
        progcache::recall_identity(cache.get(), program, prepared.context);
    EXPECT_EQ(memo.has_value(), kept);
    if (memo) {
      EXPECT_EQ(*memo, prepared.identity);
    }
  }
}
