// The trust model: MACs against planted entries, shared and foreign directories, privileged
// processes, and the options struct across versions.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backends.hpp"
#include "proc_util.hpp"
#include "test_util.hpp"

using namespace testutil;

namespace {

pcache *open_with(const std::string &uri, const std::string &secret, uint32_t flags = 0,
                  pcache_status *status = nullptr) {
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.flags = flags;
  if (!secret.empty()) {
    o.secret = secret.data();
    o.secret_size = secret.size();
  }
  pcache *h = nullptr;
  const pcache_status st = pcache_open(uri.c_str(), &o, &h);
  if (status) *status = st;
  return h;
}

std::string get(pcache *h, const std::string &key, pcache_status *st) {
  void *data = nullptr;
  size_t size = 0;
  *st = pcache_get(h, key.data(), key.size(), &data, &size);
  std::string v = data ? std::string(static_cast<char *>(data), size) : "";
  pcache_free(data);
  return v;
}

class Mac : public ::testing::TestWithParam<BackendCase> {};

}  // namespace

TEST_P(Mac, ForgedAndUnsignedEntriesAreMissesNeverReturned) {
  TempDir d;
  const std::string uri = GetParam().uri(d);
  pcache_status st;
  {
    // A writer without the secret, and one with another secret, plant entries.
    pcache *plain = open_with(uri, "");
    ASSERT_EQ(pcache_put(plain, "unsigned", 8, "evil1", 5), PCACHE_OK);
    pcache_close(plain);
    pcache *other = open_with(uri, "another secret");
    ASSERT_EQ(pcache_put(other, "forged", 6, "evil2", 5), PCACHE_OK);
    pcache_close(other);
  }
  pcache *h = open_with(uri, "team secret");
  ASSERT_NE(h, nullptr) << pcache_last_error();
  ASSERT_EQ(pcache_put(h, "good", 4, "trusted", 7), PCACHE_OK);
  EXPECT_EQ(get(h, "good", &st), "trusted");
  EXPECT_EQ(st, PCACHE_OK);
  EXPECT_EQ(get(h, "unsigned", &st), "");
  EXPECT_EQ(st, PCACHE_NOT_FOUND);
  EXPECT_NE(std::strstr(pcache_last_error(), "not signed"), nullptr) << pcache_last_error();
  EXPECT_EQ(get(h, "forged", &st), "");
  EXPECT_EQ(st, PCACHE_NOT_FOUND);
  EXPECT_NE(std::strstr(pcache_last_error(), "MAC does not match"), nullptr) << pcache_last_error();
  pcache_stats s{};
  s.struct_size = sizeof s;
  pcache_get_stats(h, &s);
  EXPECT_EQ(s.corrupt, 2u);
  EXPECT_EQ(s.hits, 1u);
  pcache_close(h);
  // A reader without a secret still reads signed entries (the checksum still guards damage).
  pcache *plain = open_with(uri, "");
  EXPECT_EQ(get(plain, "good", &st), "trusted");
  pcache_close(plain);
}

INSTANTIATE_TEST_SUITE_P(Persistent, Mac, ::testing::ValuesIn(persistent_backends()),
                         [](const auto &info) { return std::string(info.param.name); });

TEST(Trust, SecretFileFromTheEnvironment) {
  TempDir d;
  const std::string secret = d / "secret";
  write_file(secret, "s3cret\n");
  ::chmod(secret.c_str(), 0600);
  const std::string uri = "sqlite:" + (d / "c.db");
  ::setenv("PCACHE_SECRET_FILE", secret.c_str(), 1);
  pcache *h = open_with(uri, "");
  ::unsetenv("PCACHE_SECRET_FILE");
  ASSERT_NE(h, nullptr) << pcache_last_error();
  ASSERT_EQ(pcache_put(h, "k", 1, "v", 1), PCACHE_OK);
  pcache_close(h);
  pcache_status st;
  h = open_with(uri, "s3cret");  // the same secret given as an option (trailing newline dropped)
  EXPECT_EQ(get(h, "k", &st), "v");
  pcache_close(h);
  h = open_with(uri, "other");
  get(h, "k", &st);
  EXPECT_EQ(st, PCACHE_NOT_FOUND);
  pcache_close(h);
  ::chmod(secret.c_str(), 0644);
  ::setenv("PCACHE_SECRET_FILE", secret.c_str(), 1);
  open_with(uri, "", 0, &st);
  ::unsetenv("PCACHE_SECRET_FILE");
  EXPECT_EQ(st, PCACHE_ERR_PERMISSION);
  EXPECT_NE(std::strstr(pcache_last_error(), "readable by other users"), nullptr);
}

// A short secret signs and verifies (refusing it would stop a working cache on upgrade), but
// it can be found by guessing against any signed entry: the open says so. A secret file
// larger than 1 MiB is a wrong path, refused before it is read into memory.
TEST(Trust, AGuessableSecretWorksAndIsWarnedOfAndAHugeSecretFileIsRefused) {
  TempDir d;
  const std::string uri = "sqlite:" + (d / "c.db");
  const std::string file = d / "secret";
  pcache_status st;
  auto open_with_file = [&](const std::string &bytes) {
    write_file(file, bytes);
    ::chmod(file.c_str(), 0600);
    ::setenv("PCACHE_SECRET_FILE", file.c_str(), 1);
    pcache *h = open_with(uri, "", 0, &st);
    ::unsetenv("PCACHE_SECRET_FILE");
    return h;
  };
  pcache *h = open_with_file("0123456789abcde\n");  // 15 bytes once the line end is dropped
  ASSERT_EQ(st, PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_last_error(), "is 15 bytes: a secret shorter than 16 bytes"),
            nullptr)
      << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_last_error(), file.c_str()), nullptr) << pcache_last_error();
  ASSERT_EQ(pcache_put(h, "k", 1, "v", 1), PCACHE_OK);  // it still signs
  pcache_close(h);
  h = open_with(uri, "0123456789abcde", 0, &st);  // the same secret as an option: verifies
  ASSERT_EQ(st, PCACHE_OK);
  EXPECT_NE(std::strstr(pcache_last_error(), "the secret given is 15 bytes"), nullptr)
      << pcache_last_error();
  EXPECT_EQ(get(h, "k", &st), "v");
  EXPECT_EQ(st, PCACHE_OK);
  pcache_close(h);
  h = open_with(uri, "0123456789abcdef", 0, &st);  // 16 bytes: nothing to say
  ASSERT_EQ(st, PCACHE_OK);
  EXPECT_STREQ(pcache_last_error(), "");
  pcache_close(h);
  h = open_with_file("0123456789abcdef\n");
  ASSERT_EQ(st, PCACHE_OK);
  EXPECT_STREQ(pcache_last_error(), "");
  pcache_close(h);
  EXPECT_EQ(open_with_file(std::string((1 << 20) + 1, 's')), nullptr);
  EXPECT_EQ(st, PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "1048577 bytes: a secret file holds at most 1 MiB"),
            nullptr)
      << pcache_last_error();
  h = open_with_file(std::string(1 << 20, 's'));  // at the bound: used
  EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
  pcache_close(h);
}

TEST(Trust, DirectoryOthersCanWriteIsRefusedUnlessShared) {
  for (const BackendCase &b : persistent_backends()) {
    SCOPED_TRACE(b.name);
    TempDir d;
    const std::string dir = std::string(b.name) == "sqlite" ? d.path() : d / "fs";
    ::mkdir(dir.c_str(), 0700);
    ::chmod(dir.c_str(), 0777);
    pcache_status st;
    EXPECT_EQ(open_with(b.uri(d), "", 0, &st), nullptr);
    EXPECT_EQ(st, PCACHE_ERR_PERMISSION);
    EXPECT_NE(std::strstr(pcache_last_error(), "writable by other users"), nullptr)
        << pcache_last_error();
    EXPECT_NE(std::strstr(pcache_last_error(), "PCACHE_OPEN_ALLOW_SHARED"), nullptr);
    pcache *h = open_with(b.uri(d), "", PCACHE_OPEN_ALLOW_SHARED, &st);
    EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
    pcache_close(h);
    // Sticky, like /tmp: others cannot replace our files, but they can still create shard
    // directories, entries and -wal files beside the database. Refused too.
    ::chmod(dir.c_str(), 01777);
    EXPECT_EQ(open_with(b.uri(d), "", 0, &st), nullptr);
    EXPECT_EQ(st, PCACHE_ERR_PERMISSION) << pcache_last_error();
  }
}

TEST(Trust, DirectoryOwnedByAnotherUserIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  TempDir d;
  const std::string dir = d / "fs";
  ::mkdir(dir.c_str(), 0700);
  ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
  pcache_status st;
  EXPECT_EQ(open_with("filestream:" + dir, "", 0, &st), nullptr);
  EXPECT_EQ(st, PCACHE_ERR_PERMISSION);
  EXPECT_NE(std::strstr(pcache_last_error(), "owned by uid 65534"), nullptr) << pcache_last_error();
  ::setenv("PCACHE_ALLOW_SHARED", "1", 1);
  pcache *h = open_with("filestream:" + dir, "", 0, &st);
  ::unsetenv("PCACHE_ALLOW_SHARED");
  EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
  pcache_close(h);
}

TEST(Trust, PrivilegedProcessGetsNoPersistentCacheUnlessAllowed) {
  TempDir d;
  ::setenv("PCACHE_TEST_FAKE_SECURE", "1", 1);
  pcache_status st;
  EXPECT_EQ(open_with("sqlite:" + (d / "c.db"), "", 0, &st), nullptr);
  EXPECT_EQ(st, PCACHE_ERR_PERMISSION);
  EXPECT_NE(std::strstr(pcache_last_error(), "setuid"), nullptr);
  pcache *mem = open_with("memory:", "", 0, &st);
  EXPECT_EQ(st, PCACHE_OK);
  pcache_close(mem);
  pcache *h = open_with("sqlite:" + (d / "c.db"), "", PCACHE_OPEN_ALLOW_PRIVILEGED, &st);
  ::unsetenv("PCACHE_TEST_FAKE_SECURE");
  EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
  pcache_close(h);
}

TEST(Trust, OptionsFromOlderAndNewerCallers) {
  // A version-1 caller (16 bytes) is accepted.
  unsigned char v1[16] = {};
  ASSERT_EQ(pcache_options_init(reinterpret_cast<pcache_options *>(v1), 16), PCACHE_OK);
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open("memory:", reinterpret_cast<pcache_options *>(v1), &h), PCACHE_OK);
  pcache_close(h);
  // A newer caller's larger struct: known fields used, the unknown tail ignored.
  alignas(8) unsigned char v9[64];
  std::memset(v9, 0xff, sizeof v9);
  ASSERT_EQ(pcache_options_init(reinterpret_cast<pcache_options *>(v9), sizeof v9), PCACHE_OK);
  for (size_t i = sizeof(pcache_options); i < sizeof v9; ++i) EXPECT_EQ(v9[i], 0) << i;
  v9[40] = 7;  // something only a newer library would understand
  EXPECT_EQ(pcache_open("memory:", reinterpret_cast<pcache_options *>(v9), &h), PCACHE_OK);
  pcache_close(h);
  // Too small, and unknown flag bits, are refused.
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.struct_size = 8;
  EXPECT_EQ(pcache_open("memory:", &o, &h), PCACHE_ERR_INVALID_ARG);
  pcache_options_init(&o, sizeof o);
  o.flags = 0x80;
  EXPECT_EQ(pcache_open("memory:", &o, &h), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "unknown bits"), nullptr);
  pcache_options_init(&o, sizeof o);
  o.secret_size = 4;
  EXPECT_EQ(pcache_open("memory:", &o, &h), PCACHE_ERR_INVALID_ARG);
}

// A hostile neighbour, as a second real user (root is the victim, uid 65534 the attacker): in a
// directory the victim made writable by others (sticky, like /tmp), the attacker plants a
// well-formed entry (a file-stream shard directory holding an entry copied from the attacker's
// own cache) or a WAL beside the victim's database. Without PCACHE_OPEN_ALLOW_SHARED the
// directory is refused; with it and a secret, the planted entry is a miss, never served.
TEST(Trust, AnotherUserCannotPlantEntriesInADirectoryOthersCanWrite) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user (uid 65534)";
  TempDir d;
  ::chmod(d.path().c_str(), 0755);
  const std::string victim = d / "victim", attacker = d / "attacker";
  ASSERT_EQ(::mkdir(victim.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir(attacker.c_str(), 0700), 0);
  ASSERT_EQ(::chown(attacker.c_str(), 65534, 65534), 0);
  {  // the victim's caches, with one genuine entry each
    pcache *h = open_with("filestream:" + victim + "/fs", "fleet");
    ASSERT_NE(h, nullptr) << pcache_last_error();
    pcache_close(h);
    h = open_with("sqlite:" + victim + "/c.db", "fleet");
    ASSERT_NE(h, nullptr) << pcache_last_error();
    pcache_close(h);
  }
  ASSERT_EQ(::chmod((victim + "/fs").c_str(), 01777), 0);  // "shared", the way /tmp is
  ASSERT_EQ(::chmod(victim.c_str(), 01777), 0);
  // The attacker builds entries for the key "k" in caches of its own and plants them.
  const int planted = run_unprivileged([&] {
    pcache *own = open_with("filestream:" + attacker + "/fs", "");
    if (!own || pcache_put(own, "k", 1, "EVIL", 4) != PCACHE_OK) return 1;
    pcache_close(own);
    for (const std::string &f : list_files(attacker + "/fs")) {
      const std::string rel = f.substr(attacker.size() + 4);
      if (rel.size() != 35 || rel[2] != '/') continue;
      ::mkdir((victim + "/fs/" + rel.substr(0, 2)).c_str(), 0777);
      if (run_command("cp '" + f + "' '" + victim + "/fs/" + rel + "' && echo ok") != "ok\n")
        return 2;
    }
    // A WAL of the attacker's making beside the victim's database.
    write_file(victim + "/c.db-wal", std::string(4096, 'W'));
    ::chmod((victim + "/c.db-wal").c_str(), 0666);
    return 0;
  });
  ASSERT_EQ(planted, 0);
  pcache_status st;
  for (const std::string &uri : {"filestream:" + victim + "/fs", "sqlite:" + victim + "/c.db"}) {
    SCOPED_TRACE(uri);
    EXPECT_EQ(open_with(uri, ""), nullptr);  // refused: others can write where it lives
    // Deliberately shared, with the fleet's secret: the planted entry is never served.
    pcache *h = open_with(uri, "fleet", PCACHE_OPEN_ALLOW_SHARED, &st);
    ASSERT_NE(h, nullptr) << pcache_last_error();
    const std::string v = get(h, "k", &st);
    EXPECT_EQ(st, PCACHE_NOT_FOUND) << "served: " << v;
    pcache_close(h);
  }
}

// A file-stream entry is served only if it is a file this user (or root) owns that no one else
// can write: one another user owns, or one others may write, could have been planted. It is
// removed, and the next put stores the genuine one.
TEST(Trust, AnEntryFileNotOursAloneIsRemovedNeverServed) {
  TempDir d;
  pcache *h = open_with("filestream:" + (d / "fs"), "");
  ASSERT_NE(h, nullptr) << pcache_last_error();
  auto entry_file = [&] {
    std::vector<std::string> found;
    for (const std::string &f : list_files(d / "fs"))
      if (f.size() > 36 && f[f.size() - 33] == '/' && f[f.size() - 36] == '/') found.push_back(f);
    return found;
  };
  struct Damage {
    const char *what;
    std::function<int(const std::string &)> apply;  // 0 once done
    bool needs_root;
  };
  const Damage cases[] = {
      {"writable by others", [](const std::string &f) { return ::chmod(f.c_str(), 0666); }, false},
      {"writable by its group", [](const std::string &f) { return ::chmod(f.c_str(), 0620); },
       false},
      {"owned by another user",
       [](const std::string &f) { return ::chown(f.c_str(), 65534, 65534); }, true},
  };
  pcache_status st;
  for (const Damage &c : cases) {
    SCOPED_TRACE(c.what);
    if (c.needs_root && ::geteuid() != 0) continue;
    ASSERT_EQ(pcache_put(h, "k", 1, "genuine", 7), PCACHE_OK);
    EXPECT_EQ(get(h, "k", &st), "genuine");  // ours alone: served
    const std::vector<std::string> files = entry_file();
    ASSERT_EQ(files.size(), 1u);
    ASSERT_EQ(c.apply(files[0]), 0);
    EXPECT_EQ(get(h, "k", &st), "");
    EXPECT_EQ(st, PCACHE_NOT_FOUND);
    EXPECT_TRUE(entry_file().empty()) << "left in place";
  }
  pcache_close(h);
}

// OpenSSH's StrictModes walk: a parent of the cache directory that others can write without the
// sticky bit (or that another user owns) lets them swap the cache directory for their own.
TEST(Trust, AParentOthersCanWriteWithoutTheStickyBitIsRefused) {
  for (const BackendCase &b : persistent_backends()) {
    SCOPED_TRACE(b.name);
    TempDir d;
    const std::string parent = d / "open";
    ASSERT_EQ(::mkdir(parent.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(parent.c_str(), 0777), 0);
    const std::string uri = std::string(b.name) == "sqlite" ? "sqlite:" + parent + "/private/c.db"
                                                            : "filestream:" + parent + "/private";
    pcache_status st;
    EXPECT_EQ(open_with(uri, "", 0, &st), nullptr);
    EXPECT_EQ(st, PCACHE_ERR_PERMISSION);
    EXPECT_NE(std::strstr(pcache_last_error(), "a parent of the cache directory"), nullptr)
        << pcache_last_error();
    ASSERT_EQ(::chmod(parent.c_str(), 01777), 0);  // sticky: accepted, as /tmp is
    pcache *h = open_with(uri, "", 0, &st);
    EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
    pcache_close(h);
  }
}
