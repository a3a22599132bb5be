// Settings that last: the cap stored in a cache, config files, the default cache's default cap,
// and the order in which they apply (docs/admin.md).
#define PCACHE_ADMIN_UNSTABLE 1
#include <grp.h>
#include <gtest/gtest.h>
#include <progcache/progcache_admin.h>
#include <pwd.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "test_util.hpp"

using testutil::Handle;
using testutil::ScopedEnv;

namespace {

// Every test runs with its own HOME and XDG_CONFIG_HOME, and no PCACHE_* setting inherited.
class Config : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::filesystem::exists("/etc/progcache.conf"))
      GTEST_SKIP() << "/etc/progcache.conf exists on this machine and would take part";
    dir_ = testutil::make_scratch_dir("config");
    std::filesystem::create_directories(dir_ + "/xdg/progcache");
    env_.push_back(std::make_unique<ScopedEnv>("HOME", dir_ + "/home"));
    env_.push_back(std::make_unique<ScopedEnv>("XDG_CONFIG_HOME", dir_ + "/xdg"));
    env_.push_back(std::make_unique<ScopedEnv>("PCACHE_DIR", dir_ + "/default"));
    for (const char *name : {"PCACHE_URI", "PCACHE_MAX_SIZE", "PCACHE_SECRET_FILE",
                             "PCACHE_ALLOW_SHARED", "XDG_CACHE_HOME"}) {
      env_.push_back(std::make_unique<ScopedEnv>(name, ""));
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    env_.clear();
    if (!dir_.empty()) testutil::remove_tree(dir_);
  }
  void write_config(const std::string &text) {
    testutil::write_file(dir_ + "/xdg/progcache/progcache.conf", text);
  }
  // Opens uri (NULL = the default cache) with the configured cap, as pcache_options_init sets.
  static pcache *open_configured(const char *uri) {
    pcache_options o;
    EXPECT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
    EXPECT_EQ(o.max_size_bytes, PCACHE_MAX_SIZE_CONFIGURED);
    pcache *c = nullptr;
    EXPECT_EQ(pcache_open(uri, &o, &c), PCACHE_OK) << pcache_last_error();
    return c;
  }
  static pcache_admin_info info(pcache *c) {
    pcache_admin_info i{};
    i.struct_size = sizeof i;
    EXPECT_EQ(pcache_admin_info_get(c, &i), PCACHE_OK) << pcache_last_error();
    return i;
  }
  std::string dir_;
  std::vector<std::unique_ptr<ScopedEnv>> env_;
};

std::map<std::string, std::pair<std::string, std::string>> settings(pcache *c) {
  std::map<std::string, std::pair<std::string, std::string>> out;
  EXPECT_EQ(pcache_admin_config_list(
                c,
                [](const char *name, const char *value, const char *source, void *context) {
                  (*static_cast<std::map<std::string, std::pair<std::string, std::string>> *>(
                      context))[name] = {value, source};
                },
                &out),
            PCACHE_OK);
  return out;
}

}  // namespace

// `progcache config max_size` stores the cap in the cache: handles opened later without a cap of
// their own apply it (and evict by it), one opened with an explicit cap keeps its own.
TEST_F(Config, AStoredCapAppliesToEveryLaterHandle) {
  const std::string uri = "sqlite:" + dir_ + "/c.db";
  {
    pcache *c = open_configured(uri.c_str());
    EXPECT_EQ(info(c).max_size_bytes, 0u) << "a named cache has no cap by default";
    ASSERT_EQ(pcache_admin_config_set(c, "max_size", "2500"), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(info(c).max_size_bytes, 0u) << "the handle that stored it keeps its own";
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
  }
  pcache *c = open_configured(uri.c_str());
  const pcache_admin_info i = info(c);
  EXPECT_EQ(i.max_size_bytes, 2500u);
  EXPECT_STREQ(i.max_size_source, "the cache (progcache config)");
  const std::string v(1000, 'x');
  for (const char *k : {"a", "b", "c"}) ASSERT_EQ(pcache_put(c, k, 1, v.data(), v.size()), 0);
  uint64_t n = 0;
  ASSERT_EQ(pcache_count(c, &n), PCACHE_OK);
  EXPECT_EQ(n, 2u) << "the stored cap evicted the oldest";
  EXPECT_EQ(settings(c)["max_size"],
            (std::pair<std::string, std::string>{"2500", "the cache (progcache config)"}));
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  Handle explicit_cap(uri, 0);  // an explicit 0: unbounded whatever is stored
  EXPECT_EQ(info(explicit_cap).max_size_bytes, 0u);
  EXPECT_EQ(info(explicit_cap).configured_max_size, 2500u);
  ASSERT_EQ(pcache_admin_config_set(explicit_cap, "max_size", nullptr), PCACHE_OK);
  Handle after_removal(uri);
  EXPECT_EQ(info(after_removal).configured_max_size, 0u);
  EXPECT_STREQ(info(after_removal).max_size_source, "");
  EXPECT_EQ(pcache_admin_config_set(explicit_cap, "max_size", "lots"), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_config_set(explicit_cap, "cache_uri", "memory:"), PCACHE_ERR_UNSUPPORTED);
}

// The order: the URI's cap, then $PCACHE_MAX_SIZE, then the cache's, then the config file's.
TEST_F(Config, TheUriThenTheEnvironmentThenTheCacheThenTheFile) {
  const std::string uri = "sqlite:" + dir_ + "/o.db";
  write_config("max_size = 64K\n");
  {
    pcache *c = open_configured(uri.c_str());
    EXPECT_EQ(info(c).max_size_bytes, 64u << 10);
    EXPECT_EQ(std::string(info(c).max_size_source), dir_ + "/xdg/progcache/progcache.conf");
    ASSERT_EQ(pcache_admin_config_set(c, "max_size", "1M"), PCACHE_OK);
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
  }
  {
    pcache *c = open_configured(uri.c_str());
    EXPECT_EQ(info(c).max_size_bytes, 1u << 20) << "the cache's own cap beats the file";
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
  }
  {
    ScopedEnv env("PCACHE_MAX_SIZE", "2M");
    pcache *c = open_configured(uri.c_str());
    EXPECT_EQ(info(c).max_size_bytes, 2u << 20) << "the environment beats the cache";
    EXPECT_STREQ(info(c).max_size_source, "environment (PCACHE_MAX_SIZE)");
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
    ScopedEnv unbounded("PCACHE_MAX_SIZE", "0");
    c = open_configured(uri.c_str());
    EXPECT_EQ(info(c).max_size_bytes, 0u) << "PCACHE_MAX_SIZE=0 still means unbounded";
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
    c = open_configured((uri + "?max_size=3M").c_str());
    EXPECT_EQ(info(c).max_size_bytes, 3u << 20) << "the URI beats the environment";
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
  }
}

// The default cache is capped at 5 GiB unless something says otherwise; a named one is not.
TEST_F(Config, TheDefaultCacheHasADefaultCap) {
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_OK) << pcache_last_error();
  EXPECT_EQ(info(c).max_size_bytes, 5ull << 30);
  EXPECT_STREQ(info(c).max_size_source, "the default for the default cache");
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  ScopedEnv env("PCACHE_MAX_SIZE", "0");
  ASSERT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_OK);
  EXPECT_EQ(info(c).max_size_bytes, 0u);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// The default cap follows the file, not how it is named: $PCACHE_URI=sqlite:X and the URI
// sqlite:X get the same cap (the first used to get the default cache's 5 GiB, the second none),
// and a URI naming the default location gets the default cap.
TEST_F(Config, TheDefaultCapFollowsTheFileNotHowItIsNamed) {
  const std::string other = "sqlite:" + dir_ + "/other.db";
  {
    ScopedEnv uri_env("PCACHE_URI", other);
    pcache *c = open_configured(nullptr);
    EXPECT_EQ(info(c).max_size_bytes, 0u) << "named by the environment";
    pcache_close(c);
  }
  pcache *c = open_configured(other.c_str());
  EXPECT_EQ(info(c).max_size_bytes, 0u) << "named by a URI";
  pcache_close(c);
  const std::string default_location = "sqlite:" + dir_ + "/default/cache.db";  // $PCACHE_DIR's
  c = open_configured(default_location.c_str());
  EXPECT_EQ(info(c).max_size_bytes, 5ull << 30) << "the default location, named";
  pcache_close(c);
}

// cache_uri, secret_file and allow_shared come from the file too; the environment beats it;
// unknown keys are reported, not fatal.
TEST_F(Config, TheConfigFileNamesTheCacheAndTheSecret) {
  const std::string secret = dir_ + "/secret";
  testutil::write_file(secret, "team secret\n");
  ::chmod(secret.c_str(), 0600);
  write_config("# a comment\ncache_uri = sqlite:" + dir_ +
               "/from-file.db\nsecret_file = " + secret + "\ncolour = blue\n");
  {
    pcache *c = nullptr;  // $PCACHE_DIR names the default cache and beats the file's cache_uri
    ASSERT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_OK) << pcache_last_error();
    EXPECT_EQ(std::string(info(c).uri), "sqlite:" + dir_ + "/default/cache.db");
    ASSERT_EQ(pcache_close(c), PCACHE_OK);
  }
  ScopedEnv no_dir("PCACHE_DIR", "");
  ::unsetenv("PCACHE_DIR");
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_OK) << pcache_last_error();
  EXPECT_NE(std::strstr(pcache_last_error(), "unknown setting 'colour'"), nullptr)
      << pcache_last_error();
  EXPECT_EQ(std::string(info(c).uri), "sqlite:" + dir_ + "/from-file.db");
  auto s = settings(c);
  EXPECT_EQ(s["secret_file"].first, secret);
  EXPECT_EQ(s["secret_file"].second, dir_ + "/xdg/progcache/progcache.conf");
  EXPECT_EQ(s["allow_shared"].second, "");
  ASSERT_EQ(pcache_put(c, "k", 1, "v", 1), PCACHE_OK);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  // The file's secret signed the entry: it reads back under it, and a handle under another
  // secret refuses it (and removes it as forged).
  {
    Handle same("sqlite:" + dir_ + "/from-file.db");
    std::string got;
    EXPECT_EQ(same.get("k", &got), PCACHE_OK) << "the file's secret reads what it signed";
  }
  const std::string other = dir_ + "/other";
  testutil::write_file(other, "another secret");
  ::chmod(other.c_str(), 0600);
  {
    ScopedEnv env("PCACHE_SECRET_FILE", other);
    Handle h("sqlite:" + dir_ + "/from-file.db");
    std::string got;
    EXPECT_EQ(h.get("k", &got), PCACHE_NOT_FOUND) << "signed with the file's secret, not this one";
  }
  // A secret file others can read is refused, naming where the setting came from.
  ::chmod(secret.c_str(), 0644);
  EXPECT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_ERR_PERMISSION);
  EXPECT_NE(std::strstr(pcache_last_error(), "secret_file"), nullptr) << pcache_last_error();
}

// The config files are parsed once per process while they stay unchanged (a cache's open reads
// several settings); an edited file is read again, and its warnings are raised every time.
TEST_F(Config, AnEditedConfigFileIsReadAgain) {
  ScopedEnv no_dir("PCACHE_DIR", "");
  ::unsetenv("PCACHE_DIR");
  auto opened_uri = [&] {
    pcache *c = nullptr;
    EXPECT_EQ(pcache_open(nullptr, nullptr, &c), PCACHE_OK) << pcache_last_error();
    std::string uri = c ? info(c).uri : "";
    EXPECT_NE(std::strstr(pcache_last_error(), "unknown setting 'colour'"), nullptr)
        << pcache_last_error();
    if (c) {
      EXPECT_EQ(pcache_close(c), PCACHE_OK);
    }
    return uri;
  };
  write_config("cache_uri = sqlite:" + dir_ + "/a.db\ncolour = red\n");
  EXPECT_EQ(opened_uri(), "sqlite:" + dir_ + "/a.db");
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));  // old enough to be remembered
  EXPECT_EQ(opened_uri(), "sqlite:" + dir_ + "/a.db");
  EXPECT_EQ(opened_uri(), "sqlite:" + dir_ + "/a.db");                   // from what was remembered
  write_config("cache_uri = sqlite:" + dir_ + "/b.db\ncolour = red\n");  // same size
  EXPECT_EQ(opened_uri(), "sqlite:" + dir_ + "/b.db");
}

// A cap stored without the cache's secret is not believed by those who hold it: a neighbour who
// can write the store cannot shrink the team's cache to nothing.
TEST_F(Config, AStoredCapIsSignedWithTheCachesSecret) {
  const std::string uri = "sqlite:" + dir_ + "/s.db";
  const std::string secret = dir_ + "/secret";
  testutil::write_file(secret, "team secret");
  ::chmod(secret.c_str(), 0600);
  {
    Handle neighbour(uri);  // no secret
    ASSERT_EQ(pcache_admin_config_set(neighbour, "max_size", "1K"), PCACHE_OK);
  }
  ScopedEnv env("PCACHE_SECRET_FILE", secret);
  pcache *c = open_configured(uri.c_str());
  // Neither the neighbour's 1K nor none: a cap that cannot be verified is the default one.
  EXPECT_EQ(info(c).max_size_bytes, uint64_t(5) << 30) << "an unsigned cap was applied";
  ASSERT_EQ(pcache_admin_config_set(c, "max_size", "4K"), PCACHE_OK);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  c = open_configured(uri.c_str());
  EXPECT_EQ(info(c).max_size_bytes, 4096u) << "a signed cap is";
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// In a setuid/setgid process the user's config file is the caller's: only /etc counts.
TEST_F(Config, APrivilegedProcessReadsOnlyTheSystemFile) {
  write_config("max_size = 64K\n");
  ScopedEnv secure("PCACHE_TEST_FAKE_SECURE", "1");
  pcache_options o;
  ASSERT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
  o.flags = PCACHE_OPEN_ALLOW_PRIVILEGED;
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open("memory:", &o, &c), PCACHE_OK) << pcache_last_error();
  const auto s = settings(c);
  EXPECT_EQ(s.at("config_files").first, "/etc/progcache.conf");
  EXPECT_EQ(s.at("max_size").second, "");
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// A team cache: with allow_shared, what one user creates the group can read and write (umask
// 007 unless set), whatever the creating process's own umask; a private cache stays closed to
// the second user. Needs root, to become a second user in a child.
TEST_F(Config, ASharedCacheIsWritableByASecondUserOfTheGroup) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to a second user";
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);  // the second user may walk into the scratch dir
  const mode_t old_umask = ::umask(022);      // the usual one: it would drop the group's w bit
  struct Case {
    std::string uri, file;
    bool shared;
  };
  const Case cases[] = {{"sqlite:" + dir_ + "/team/c.db", dir_ + "/team/c.db", true},
                        {"filestream:" + dir_ + "/team-fs", dir_ + "/team-fs/stats", true},
                        {"sqlite:" + dir_ + "/mine/c.db", dir_ + "/mine/c.db", false}};
  for (const Case &c : cases) {
    {
      ScopedEnv shared("PCACHE_ALLOW_SHARED", c.shared ? "1" : "0");
      Handle h(c.uri);
      ASSERT_NE(h.get(), nullptr) << c.uri;
      ASSERT_EQ(h.put("from root", "v"), PCACHE_OK) << c.uri;
      uint64_t n = 0;
      ASSERT_EQ(pcache_count(h, &n), PCACHE_OK);  // the stats file exists now
    }
    struct stat st {};
    ASSERT_EQ(::stat(c.file.c_str(), &st), 0) << c.file;
    EXPECT_EQ(st.st_mode & 0777, c.shared ? 0660u : 0600u) << c.file;
    ASSERT_EQ(::stat(std::filesystem::path(c.file).parent_path().string().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, c.shared ? 0770u : 0700u) << c.file;
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // nobody, still in root's group: the group bits are what let it in.
      if (::setuid(65534) != 0) ::_exit(10);
      ::setenv("PCACHE_ALLOW_SHARED", "1", 1);
      pcache *h = nullptr;
      if (pcache_open(c.uri.c_str(), nullptr, &h) != PCACHE_OK) ::_exit(20);
      void *data = nullptr;
      size_t size = 0;
      if (pcache_get(h, "from root", 9, &data, &size) != PCACHE_OK) ::_exit(21);
      pcache_free(data);
      if (pcache_put(h, "from nobody", 11, "w", 1) != PCACHE_OK) ::_exit(22);
      pcache_close(h);
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    if (c.shared)
      EXPECT_EQ(WEXITSTATUS(status), 0) << c.uri << ": the second user could not use the cache";
    else
      EXPECT_EQ(WEXITSTATUS(status), 20) << c.uri << ": a private cache let a second user in";
  }
  ::umask(old_umask);
  ScopedEnv bad("PCACHE_UMASK", "9");
  ScopedEnv shared("PCACHE_ALLOW_SHARED", "1");
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(("sqlite:" + dir_ + "/bad/c.db").c_str(), nullptr, &h),
            PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "umask"), nullptr) << pcache_last_error();
}

// A config file is read whole whatever its lines' lengths, with inline comments as git reads them
// and double quotes to keep such characters (a 300-byte path was cut at 200 bytes, and a
// "# comment" after a value became part of it, failing every open on the machine).
TEST_F(Config, LongLinesInlineCommentsAndQuotedValues) {
  const std::string long_dir = dir_ + "/" + std::string(150, 'd') + "/" + std::string(150, 'e');
  std::filesystem::create_directories(long_dir);
  write_config("cache_uri = sqlite:" + long_dir + "/c.db   # the team's cache\n" +
               "max_size = 64K ; a comment too\n" + "umask = \"007\"  # quoted\n");
  pcache *c = open_configured(nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(std::string(pcache_last_error()), "");
  const auto s = settings(c);
  EXPECT_EQ(s.at("cache_uri").first, "sqlite:" + long_dir + "/c.db");
  EXPECT_EQ(s.at("max_size").first, "65536");
  EXPECT_EQ(s.at("umask").first, "007");
  EXPECT_EQ(info(c).max_size_bytes, 65536u);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
  // A line that is not key = value is named with its line number; the others still count.
  write_config("max_size = 32K\nthis is not a setting\nsecret_file = \"unterminated\n");
  c = open_configured(("sqlite:" + dir_ + "/l.db").c_str());
  const std::string warning = pcache_last_error();
  EXPECT_NE(warning.find("progcache.conf:2"), std::string::npos) << warning;
  EXPECT_EQ(info(c).max_size_bytes, 32768u);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// A config file another user can change is ignored with a warning: it names the cache and its
// secret, and says whether shared directories are trusted (a world-writable one could point the
// user's processes at planted binaries). Group-writable is fine when the group is the user's own
// (a user private group, where umask 002 is the norm).
TEST_F(Config, AConfigFileAnotherUserCanChangeIsIgnored) {
  const std::string file = dir_ + "/xdg/progcache/progcache.conf";
  write_config("max_size = 64K\n");
  const auto cap_with_mode = [&](mode_t file_mode, mode_t dir_mode) {
    ::chmod(file.c_str(), file_mode);
    ::chmod((dir_ + "/xdg/progcache").c_str(), dir_mode);
    pcache *c = open_configured(("sqlite:" + dir_ + "/m.db").c_str());
    const std::string warning = pcache_last_error();
    const uint64_t cap = c ? info(c).max_size_bytes : 0;
    if (c) pcache_close(c);
    return std::make_pair(cap, warning);
  };
  auto [cap, warning] = cap_with_mode(0644, 0755);
  EXPECT_EQ(cap, 65536u) << warning;
  for (const auto &[file_mode, dir_mode] : {std::pair<mode_t, mode_t>{0646, 0755}, {0644, 0757}}) {
    std::tie(cap, warning) = cap_with_mode(file_mode, dir_mode);
    EXPECT_NE(cap, 65536u) << std::oct << file_mode << " " << dir_mode;
    EXPECT_NE(warning.find("can be changed by another user; ignored"), std::string::npos)
        << warning;
  }
  const struct passwd *user = ::getpwuid(::geteuid());
  const struct group *group = ::getgrgid(::getegid());
  const bool private_group = user && group && std::string(user->pw_name) == group->gr_name;
  std::tie(cap, warning) = cap_with_mode(0664, 0775);
  EXPECT_EQ(cap == 65536u, private_group) << warning;
  ::chmod((dir_ + "/xdg/progcache").c_str(), 0755);
}

// A NUL in a config file's value is quoted in the message as \0, with the rest after it:
// pcache_last_error() is a C string, and the message ended at the NUL ("max_size in FILE '1G").
TEST_F(Config, AMessageQuotingANulShowsItAndTheRest) {
  write_config(std::string("max_size = 1G\0junk\n", 19));
  pcache_options o;
  ASSERT_EQ(pcache_options_init(&o, sizeof o), PCACHE_OK);
  pcache *c = nullptr;
  ASSERT_EQ(pcache_open(("sqlite:" + dir_ + "/n.db").c_str(), &o, &c), PCACHE_ERR_INVALID_ARG);
  const std::string message = pcache_last_error();
  EXPECT_NE(message.find("'1G\\0junk' is not a size"), std::string::npos) << message;
  // A warning quoting one, too.
  write_config(std::string("col\0our = 1\n", 12));
  c = open_configured(("sqlite:" + dir_ + "/n.db").c_str());
  ASSERT_NE(c, nullptr);
  const std::string warning = pcache_last_error();
  EXPECT_NE(warning.find("col\\0our"), std::string::npos) << warning;
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// A config path that is a FIFO or a link to a device is never read, so it never hangs an open.
TEST_F(Config, AConfigFileThatIsNotARegularFileIsIgnored) {
  const std::string path = dir_ + "/xdg/progcache/progcache.conf";
  for (int kind = 0; kind < 2; ++kind) {
    std::filesystem::remove(path);
    if (kind == 0)
      ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
    else
      std::filesystem::create_symlink("/dev/zero", path);
    const pid_t child = ::fork();
    if (child == 0) {
      ::alarm(10);  // a hang ends the child by SIGALRM
      pcache *c = nullptr;
      const pcache_status st = pcache_open(("sqlite:" + dir_ + "/f.db").c_str(), nullptr, &c);
      const bool warned =
          std::string(pcache_last_error()).find("not a regular file") != std::string::npos;
      pcache_close(c);
      ::_exit(st == PCACHE_OK && warned ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (kind == 0 ? "a FIFO" : "a link to /dev/zero") << ": status " << status;
  }
}

// A cap larger than any store is refused when set, and a stored one that cannot be read back is
// reported, never ignored quietly (1000T was stored, then read as no cap at all).
TEST_F(Config, LargeCapsAreStoredAndOutOfRangeOnesRefused) {
  Handle h("sqlite:" + dir_ + "/big.db");
  ASSERT_EQ(pcache_admin_config_set(h, "max_size", "1000T"), PCACHE_OK) << pcache_last_error();
  Handle again("sqlite:" + dir_ + "/big.db");
  EXPECT_EQ(info(again).configured_max_size, uint64_t(1000) << 40);
  EXPECT_EQ(pcache_admin_config_set(h, "max_size", "2000000T"), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::string(pcache_last_error()).find("larger than 1 EiB"), std::string::npos);
  uint64_t bytes = 0;
  EXPECT_EQ(pcache_admin_parse_size("99999999999999999999", &bytes), PCACHE_ERR_INVALID_ARG);
  EXPECT_EQ(pcache_admin_parse_size("1152921504606846976", &bytes), PCACHE_OK);  // 1 EiB
}

// A stored cap damaged or forged over is not believed, and the cache does not become unbounded:
// the default cap applies, with a warning.
TEST_F(Config, AStoredCapThatCannotBeVerifiedFallsBackToTheDefaultNeverToNone) {
  const std::string db = dir_ + "/g.db";
  {
    Handle h("sqlite:" + db);
    ASSERT_EQ(pcache_admin_config_set(h, "max_size", "1K"), PCACHE_OK);
  }
  sqlite3 *raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE memo SET record = randomblob(length(record))", nullptr,
                         nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  pcache *c = open_configured(("sqlite:" + db).c_str());
  EXPECT_EQ(info(c).max_size_bytes, uint64_t(5) << 30);
  EXPECT_NE(std::string(info(c).max_size_source).find("cannot be verified"), std::string::npos);
  ASSERT_EQ(pcache_close(c), PCACHE_OK);
}

// A bundle is never written over, or read from, a file the cache owns: its database, WAL, lock
// directory (a file there made every compile skip the cross-process lock) or what is in it.
TEST_F(Config, ExportAndImportRefuseTheCachesOwnFiles) {
  const std::string db = dir_ + "/x.db";
  Handle h("sqlite:" + db);
  ASSERT_EQ(h.put("k", "v"), PCACHE_OK);
  for (const std::string &path :
       {db, db + "-wal", db + "-counters", db + ".locks", db + ".locks/stripe-1"}) {
    EXPECT_EQ(pcache_admin_export(h, path.c_str(), nullptr, nullptr, nullptr),
              PCACHE_ERR_INVALID_ARG)
        << path;
    EXPECT_EQ(pcache_admin_import(h, path.c_str(), nullptr, nullptr, nullptr, nullptr),
              PCACHE_ERR_INVALID_ARG)
        << path;
  }
  EXPECT_FALSE(std::filesystem::is_regular_file(db + ".locks"));
  EXPECT_EQ(pcache_admin_export(h, (dir_ + "/ok.pcb").c_str(), nullptr, nullptr, nullptr),
            PCACHE_OK);
}

namespace {

// Runs fn as uid in the team's group (its only supplementary group) in a child; its exit status.
int as_team_member(uid_t uid, gid_t team, const std::function<int()> &fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const gid_t groups[] = {team};
    if (::setgroups(1, groups) != 0 || ::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(10);
    ::_exit(fn());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

// The documented team setup, end to end with two real users: a cache in a setgid directory of
// the team's group (chmod 2770) and one secret the group may read (0640). The library's chmod of
// a directory it made cleared the setgid bit, so the next member was refused ("Permission
// denied", lock files too), and the shared secret was refused as "readable by other users".
TEST_F(Config, ATeamCacheWorksForTwoUsersWithOneSecretInASetgidDirectory) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to become two users";
  constexpr gid_t kTeam = 4242;
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  const std::string team = dir_ + "/team", secret = dir_ + "/team.secret";
  ASSERT_EQ(::mkdir(team.c_str(), 0770), 0);
  ASSERT_EQ(::chown(team.c_str(), 0, kTeam), 0);
  ASSERT_EQ(::chmod(team.c_str(), 02770), 0);
  testutil::write_file(secret, "the team's secret\n");
  ASSERT_EQ(::chown(secret.c_str(), 0, kTeam), 0);
  ASSERT_EQ(::chmod(secret.c_str(), 0640), 0);
  ScopedEnv shared("PCACHE_ALLOW_SHARED", "1");
  ScopedEnv key("PCACHE_SECRET_FILE", secret);
  const std::string source = "extern \"C\" __global__ void k(int *x) { *x = 42; }\n";
  const char *options[] = {"-arch=sm_90"};
  for (const std::string &uri : {"filestream:" + team + "/fs", "sqlite:" + team + "/db/c.db"}) {
    auto member = [&](const char *mine, const char *theirs) {
      pcache *h = nullptr;
      if (pcache_open(uri.c_str(), nullptr, &h) != PCACHE_OK) return 20;
      if (pcache_put(h, mine, std::strlen(mine), "v", 1) != PCACHE_OK) return 21;
      if (theirs) {
        void *data = nullptr;
        size_t size = 0;
        if (pcache_get(h, theirs, std::strlen(theirs), &data, &size) != PCACHE_OK) return 22;
        pcache_free(data);
      }
      pcache_program p = testutil::make_program("team.cu", source, options, 1);
      pcache_compiled *r = nullptr;
      if (pcache_compile(h, &p, &r) != PCACHE_OK) return 23;  // the lock files too
      const bool hit = pcache_compiled_from_cache(r) != 0;
      pcache_compiled_free(r);
      pcache_close(h);
      return theirs && !hit ? 24 : 0;
    };
    EXPECT_EQ(as_team_member(65534, kTeam, [&] { return member("from-a", nullptr); }), 0) << uri;
    EXPECT_EQ(as_team_member(65533, kTeam, [&] { return member("from-b", "from-a"); }), 0)
        << uri << ": the second member could not use the cache";
  }
  for (const std::string &sub : testutil::list_files(team)) {
    struct stat st {};
    ASSERT_EQ(::stat(std::filesystem::path(sub).parent_path().string().c_str(), &st), 0);
    EXPECT_TRUE(st.st_mode & S_ISGID) << sub << "'s directory lost the setgid bit";
    EXPECT_EQ(st.st_gid, kTeam) << sub;
  }
}

// $HOME unset or empty (env -i, cron, a service): the user's config file and default cache are
// in the passwd entry's home. There was no default cache at all ("no default cache location")
// and no user config file.
TEST_F(Config, WithoutHomeTheUsersFilesAreInThePasswdHome) {
  struct passwd pw, *user = nullptr;
  char buf[4096];
  if (::getpwuid_r(::geteuid(), &pw, buf, sizeof buf, &user) != 0 || !user || !user->pw_dir ||
      user->pw_dir[0] != '/')
    GTEST_SKIP() << "this user has no home in the passwd database";
  const std::string home = user->pw_dir;
  for (const char *name : {"HOME", "XDG_CONFIG_HOME", "PCACHE_DIR"}) ::unsetenv(name);
  Handle c("memory:");
  const auto s = settings(c);
  ASSERT_EQ(s.count("config_files"), 1u);
  EXPECT_EQ(s.at("config_files").first,
            "/etc/progcache.conf:" + home + "/.config/progcache/progcache.conf");
  for (const char *unusable : {"", "relative/home"}) {  // set but empty, or relative: the same
    ScopedEnv set("HOME", unusable);
    EXPECT_EQ(settings(c).at("config_files").first,
              "/etc/progcache.conf:" + home + "/.config/progcache/progcache.conf")
        << "HOME=" << unusable;
  }
  ::unsetenv("HOME");
  // The default cache, looked for without creating anything (it need not exist here).
  const std::string db = home + "/.cache/progcache/cache.db";
  if (std::filesystem::exists(db)) return;
  pcache_options o;
  pcache_options_init(&o, sizeof o);
  o.flags = PCACHE_OPEN_EXISTING;
  pcache *h = nullptr;
  EXPECT_EQ(pcache_open(nullptr, &o, &h), PCACHE_NOT_FOUND);
  EXPECT_NE(std::string(pcache_last_error()).find("no cache at '" + db + "'"), std::string::npos)
      << pcache_last_error();
  EXPECT_FALSE(std::filesystem::exists(db));
  for (const char *unusable : {"", "relative/home"}) {  // set but empty, or relative: the same
    ::setenv("HOME", unusable, 1);
    EXPECT_EQ(pcache_open(nullptr, &o, &h), PCACHE_NOT_FOUND);
    EXPECT_NE(std::string(pcache_last_error()).find(db), std::string::npos)
        << "HOME=" << unusable << ": " << pcache_last_error();
  }
}

// A leading ~/ in a cache path is the home, wherever the URI comes from: set where no shell
// expands it (a service's or a container's environment, a config file), it made a directory
// named "~" under the working directory, a different cache in every directory.
TEST_F(Config, ALeadingTildeInACachePathIsTheHome) {
  const std::string home = dir_ + "/home", cwd = dir_ + "/cwd";
  std::filesystem::create_directories(home);
  std::filesystem::create_directories(cwd);
  const std::string before = std::filesystem::current_path();
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  struct Back {
    std::string dir;
    ~Back() { EXPECT_EQ(::chdir(dir.c_str()), 0); }
  } back{before};
  {
    Handle named("sqlite:~/named.db");
    ASSERT_EQ(pcache_put(named, "k", 1, "v", 1), PCACHE_OK);
  }
  EXPECT_TRUE(std::filesystem::exists(home + "/named.db"));
  {
    ScopedEnv uri("PCACHE_URI", "tiered:memory:|filestream:~/fs?max_size=1M");
    Handle from_env("");
    ASSERT_EQ(pcache_put(from_env, "k", 1, "v", 1), PCACHE_OK);
  }
  EXPECT_TRUE(std::filesystem::exists(home + "/fs"));
  {
    ScopedEnv no_dir("PCACHE_DIR", "");
    ::unsetenv("PCACHE_DIR");
    write_config("cache_uri = sqlite:~/from-file.db\n");
    Handle from_file("");
    ASSERT_EQ(pcache_put(from_file, "k", 1, "v", 1), PCACHE_OK);
  }
  EXPECT_TRUE(std::filesystem::exists(home + "/from-file.db"));
  EXPECT_FALSE(std::filesystem::exists(cwd + "/~")) << "a directory named ~ was made";

  // The secret file's path too.
  testutil::write_file(home + "/secret", "a secret of thirty-two bytes....");
  ::chmod((home + "/secret").c_str(), 0600);
  write_config("secret_file = ~/secret\n");
  {
    Handle signing("sqlite:" + dir_ + "/signed.db");
    ASSERT_EQ(signing.put("k", "v"), PCACHE_OK);
  }
  {
    ScopedEnv same("PCACHE_SECRET_FILE", home + "/secret");
    Handle h("sqlite:" + dir_ + "/signed.db");
    std::string got;
    EXPECT_EQ(h.get("k", &got), PCACHE_OK) << "signed with ~/secret's bytes";
  }

  // What `progcache run` hands its child is absolute, parameters kept.
  char out[4096];
  size_t size = sizeof out;
  ASSERT_EQ(pcache_admin_absolute_uri("sqlite:~/a.db?busy_timeout_ms=10", out, &size), PCACHE_OK);
  EXPECT_STREQ(out, ("sqlite:" + home + "/a.db?busy_timeout_ms=10").c_str());
  size = sizeof out;
  ASSERT_EQ(pcache_admin_absolute_uri("filestream:rel?max_size=1M", out, &size), PCACHE_OK);
  EXPECT_STREQ(out, ("filestream:" + cwd + "/rel?max_size=1M").c_str());

  // ~user is not guessed at: refused, saying what is expanded.
  pcache *c = nullptr;
  EXPECT_EQ(pcache_open("sqlite:~bob/x.db", nullptr, &c), PCACHE_ERR_INVALID_ARG);
  EXPECT_NE(std::strstr(pcache_last_error(), "only a leading ~/ is expanded"), nullptr)
      << pcache_last_error();
  EXPECT_FALSE(std::filesystem::exists(cwd + "/~bob"));
}
