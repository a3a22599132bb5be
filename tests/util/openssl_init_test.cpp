// When progcache may skip reading OpenSSL's configuration: only where the file cannot change
// anything (src/util/openssl_init.hpp). The end-to-end check that a configuration which does
// matter is honoured is in tests/cli/cli_test.sh.
#include "util/openssl_init.hpp"

#include <gtest/gtest.h>
#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include "proc_util.hpp"
#include "scratch.hpp"
#include "test_util.hpp"
#include "util/openssl_config_memo.hpp"

using namespace testutil;

namespace {

bool matters(const TempDir &dir, const std::string &text) {
  write_file(dir / "openssl.cnf", text);
  return progcache::openssl_config_matters((dir / "openssl.cnf").c_str());
}

TEST(OpensslConfig, FilesThatChangeNothingAreSkipped) {
  TempDir dir;
  EXPECT_FALSE(matters(dir, ""));
  EXPECT_FALSE(matters(dir, "HOME = .\n[ ca ]\ndefault_ca = CA_default\n"));
  // Debian's shipped file: the init section is named but empty.
  EXPECT_FALSE(matters(dir, "openssl_conf = openssl_init\n[openssl_init]\n[ ca ]\nx = y\n"));
  EXPECT_FALSE(matters(dir, "openssl_conf = missing_section\n"));
  EXPECT_FALSE(matters(dir, "openssl_conf = init\n[init]\n# .include fipsmodule.cnf\n"));
}

TEST(OpensslConfig, FilesThatSelectProvidersOrPropertiesAreLoaded) {
  TempDir dir;
  EXPECT_TRUE(matters(dir,
                      "openssl_conf = init\n[init]\nalg_section = algs\n"
                      "[algs]\ndefault_properties = fips=yes\n"));
  EXPECT_TRUE(matters(dir, "openssl_conf = init\n[init]\nproviders = prov\n[prov]\nfips = f\n"));
  EXPECT_TRUE(matters(dir, "openssl_conf = init\n[init]\nssl_conf = ssl\n"));
  // Through a variable and through an included file, as OpenSSL itself reads them.
  EXPECT_TRUE(matters(dir, "name = init\nopenssl_conf = $name\n[init]\nssl_conf = ssl\n"));
  write_file(dir / "fips.cnf", "[init]\nproviders = prov\n");
  EXPECT_TRUE(matters(dir, "openssl_conf = init\n.include " + (dir / "fips.cnf") + "\n"));
}

TEST(OpensslConfig, UnreadableFilesAreLeftToOpenssl) {
  TempDir dir;
  ERR_clear_error();
  EXPECT_TRUE(progcache::openssl_config_matters((dir / "absent.cnf").c_str()));
  EXPECT_TRUE(progcache::openssl_config_matters(nullptr));
  EXPECT_TRUE(matters(dir, "openssl_conf = init\n[init\nx = y\n"));
  EXPECT_TRUE(matters(dir, "openssl_conf = $undefined_variable\n"));
  EXPECT_EQ(ERR_peek_error(), 0u) << "the caller's OpenSSL error queue was left with our errors";
}

// The verdict is remembered in the user's cache directory, by the file's text and OpenSSL's
// version, so a fresh process skips the parse (and its thread) while the file stays as it is.
class OpensslConfigMemoTest : public ::testing::Test {
 protected:
  TempDir home;
  ScopedEnv cache_home{"XDG_CACHE_HOME", home / "cache"};
  const std::string file = home / "openssl.cnf";

  progcache::OpensslConfigMemo memo(const std::string &text, unsigned long version = 0x30000000) {
    write_file(file, text);
    return progcache::OpensslConfigMemo(file.c_str(), version);
  }
};

TEST_F(OpensslConfigMemoTest, AVerdictIsRecalledForTheSameTextAndOpensslOnly) {
  const std::string text = "openssl_conf = init\n[init]\n# .include fipsmodule.cnf\n";
  EXPECT_EQ(memo(text).recall(), std::nullopt);
  memo(text).remember(false);
  EXPECT_EQ(memo(text).recall(), std::optional<bool>(false));
  EXPECT_EQ(memo(text, 0x30000010).recall(), std::nullopt) << "another OpenSSL parses it anew";
  EXPECT_EQ(memo(text + "ssl_conf = ssl\n").recall(), std::nullopt) << "an edited file";
  memo(text + "ssl_conf = ssl\n").remember(true);
  EXPECT_EQ(memo(text + "ssl_conf = ssl\n").recall(), std::optional<bool>(true));
  EXPECT_EQ(memo(text).recall(), std::optional<bool>(false));
  struct stat st;
  ASSERT_EQ(::stat((home / "cache/progcache").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// A writer killed between its temporary file and the rename leaves the temporary behind: the
// next memo written reaps those of writers that no longer exist, and no one else's.
TEST_F(OpensslConfigMemoTest, TemporariesOfWritersThatDiedAreReaped) {
  const std::string text = "openssl_conf = init\n[init]\n";
  const std::string dir = home / "cache/progcache";
  const pid_t dead = spawn([] { return 0; });
  ASSERT_EQ(wait_for(dead), 0);
  memo(text).remember(false);  // makes the directory
  const std::string abandoned = dir + "/openssl-conf-0123.tmp." + std::to_string(dead);
  const std::string live = dir + "/openssl-conf-4567.tmp." + std::to_string(::getppid());
  const std::string other = dir + "/other.tmp." + std::to_string(dead);
  for (const std::string &path : {abandoned, live, other}) write_file(path, "skip\n");
  memo(text + "# edited\n").remember(false);
  EXPECT_FALSE(std::filesystem::exists(abandoned)) << "a dead writer's temporary was kept";
  EXPECT_TRUE(std::filesystem::exists(live)) << "a live writer's temporary was removed";
  EXPECT_TRUE(std::filesystem::exists(other)) << "a file that is not a memo's was removed";
  EXPECT_EQ(memo(text + "# edited\n").recall(), std::optional<bool>(false));
}

TEST_F(OpensslConfigMemoTest, TextsThatDependOnOtherFilesOrTheEnvironmentAreNeverRemembered) {
  for (const std::string text : {".include /etc/ssl/fips.cnf\n", "  .INCLUDE=fips.cnf\n",
                                 "x = $ENV::HOME\n", "openssl_conf = ${ENV::INIT}\n",
                                 "a = \"#\" $ENV::X\n", "a = b \\\n# c\n", "a = b\\#c $ENV::X\n"}) {
    SCOPED_TRACE(text);
    const progcache::OpensslConfigMemo m = memo(text);
    ASSERT_NE(m.path(), "");
    m.remember(false);
    EXPECT_FALSE(std::filesystem::exists(m.path())) << "a memo was written";
    EXPECT_EQ(memo(text).recall(), std::nullopt);
  }
  // Comments may say anything (Debian's file names both in comments).
  const std::string commented = "# .include fipsmodule.cnf\n# oid_file = $ENV::HOME/.oid\n";
  memo(commented).remember(false);
  EXPECT_EQ(memo(commented).recall(), std::optional<bool>(false));
}

TEST_F(OpensslConfigMemoTest, AMemoThatIsNotPlainlyOursIsIgnored) {
  const std::string text = "openssl_conf = init\n[init]\n";
  const progcache::OpensslConfigMemo m = memo(text);
  m.remember(false);
  ASSERT_EQ(m.recall(), std::optional<bool>(false));
  // Anything but the two verdicts, and every single flipped bit of one of them.
  std::vector<std::string> contents = {"", "skip", "0\n", "skip\nskip\n", "load "};
  for (const std::string verdict : {"skip\n", "load\n"})
    for (size_t bit = 0; bit < 8 * verdict.size(); ++bit) {
      std::string flipped = verdict;
      flipped[bit / 8] = char(flipped[bit / 8] ^ (1 << (bit % 8)));
      contents.push_back(flipped);
    }
  for (const std::string &content : contents) {
    write_file(m.path(), content);
    ::chmod(m.path().c_str(), 0600);
    EXPECT_EQ(m.recall(), std::nullopt) << "content '" << content << "'";
  }
  write_file(m.path(), "skip\n");
  ::chmod(m.path().c_str(), 0622);
  EXPECT_EQ(m.recall(), std::nullopt) << "a memo others may write";
  ::chmod(m.path().c_str(), 0600);
  ::chmod((home / "cache/progcache").c_str(), 0777);
  EXPECT_EQ(m.recall(), std::nullopt) << "a directory others may write";
  ::chmod((home / "cache/progcache").c_str(), 0700);
  EXPECT_EQ(m.recall(), std::optional<bool>(false));
  ASSERT_EQ(::unlink(m.path().c_str()), 0);
  ASSERT_EQ(::symlink((home / "elsewhere").c_str(), m.path().c_str()), 0);
  write_file(home / "elsewhere", "skip\n");
  EXPECT_EQ(m.recall(), std::nullopt) << "a symbolic link";
}

TEST_F(OpensslConfigMemoTest, PrivilegedProcessesAndUnreadableFilesHaveNoMemo) {
  EXPECT_EQ(progcache::OpensslConfigMemo((home / "absent.cnf").c_str(), 1).path(), "");
  EXPECT_EQ(progcache::OpensslConfigMemo(nullptr, 1).path(), "");
  ScopedEnv secure("PCACHE_TEST_FAKE_SECURE", "1");
  EXPECT_EQ(memo("a = b\n").path(), "");
}

TEST_F(OpensslConfigMemoTest, AFreshProcessRemembersTheSystemFilesVerdict) {
  // init_openssl() runs once per process: a fresh one (this binary, re-executed) initialises
  // OpenSSL, then the memo it left behind must hold what the parse says.
  char *system_file = CONF_get1_default_config_file();
  const std::string path = system_file ? system_file : "";
  OPENSSL_free(system_file);
  const progcache::OpensslConfigMemo m(path.c_str(), OpenSSL_version_num());
  if (m.path().empty()) GTEST_SKIP() << "this machine's OpenSSL configuration is not memoable";
  ASSERT_EQ(run_test_in_fresh_process("OpensslConfigMemoChild.DISABLED_Init", {}), 0);
  ASSERT_NE(m.recall(), std::nullopt) << m.path();
  EXPECT_EQ(*m.recall(), progcache::openssl_config_matters(path.c_str()));
}

TEST(OpensslConfigMemoChild, DISABLED_Init) {  // run only by the test above
  progcache::init_openssl();
}

}  // namespace
