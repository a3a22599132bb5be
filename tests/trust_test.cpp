// The trust model: MACs against planted entries, shared and foreign directories, privileged
// processes, and the options struct across versions.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "backends.hpp"
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

TEST(Trust, WorldWritableDirectoryIsRefusedUnlessSharedOrSticky) {
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
    ::chmod(dir.c_str(), 01777);  // sticky, like /tmp: others cannot replace our files
    h = open_with(b.uri(d), "", 0, &st);
    EXPECT_EQ(st, PCACHE_OK) << pcache_last_error();
    pcache_close(h);
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
