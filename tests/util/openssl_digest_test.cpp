// The key's BLAKE2b taken straight from OpenSSL's default provider (src/util/openssl_digest.hpp):
// the same bytes as a fetched digest, and never where the process could refuse BLAKE2b. The
// digest is chosen once per process, so each case runs in a re-executed child of this binary.
#include "util/openssl_digest.hpp"

#include <gtest/gtest.h>
#include <openssl/conf.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "core/key.hpp"
#include "proc_util.hpp"
#include "scratch.hpp"
#include "util/hex.hpp"
#include "util/openssl_init.hpp"

using namespace testutil;

namespace {

// Runs OpensslDigestChild.DISABLED_Report in a fresh process with env set (and a fresh user cache
// directory); returns what it wrote.
std::string child_report(const TempDir &dir, std::vector<std::pair<std::string, std::string>> env) {
  const std::string out = dir / "report";
  env.emplace_back("PCACHE_TEST_DIGEST_OUT", out);
  env.emplace_back("XDG_CACHE_HOME", dir.path());
  EXPECT_EQ(run_test_in_fresh_process("OpensslDigestChild.DISABLED_Report", env), 0);
  return read_file(out);
}

bool system_config_matters() {
  char *file = CONF_get1_default_config_file();
  const bool matters = progcache::openssl_config_matters(file);
  OPENSSL_free(file);
  return matters;
}

// BLAKE2b-512("abc"), RFC 7693 appendix A; content_digest keeps its first 32 bytes.
constexpr const char *kAbc = "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1";

TEST(OpensslDigest, TheDefaultProvidersBlake2bIsTheFetchedOne) {
  TempDir dir;
  const std::string direct = child_report(dir, {});
  const std::string fetched = child_report(dir, {{"PCACHE_TEST_FETCH_DIGESTS", "1"}});
  // Where the configuration changes nothing the digest comes from the default provider; a file
  // named by $OPENSSL_CONF is always loaded.
  const char *conf = std::getenv("OPENSSL_CONF");
  const bool loaded = (conf && *conf) || system_config_matters();
  const std::string expected_source = loaded ? "fetched" : "default provider";
  EXPECT_EQ(direct.substr(0, direct.find('\n')), "blake2b " + expected_source) << direct;
  EXPECT_EQ(fetched.substr(0, fetched.find('\n')), "blake2b fetched") << fetched;
  EXPECT_EQ(direct.substr(direct.find('\n')), fetched.substr(fetched.find('\n')));
  EXPECT_NE(direct.find(std::string("abc ") + kAbc), std::string::npos) << direct;
}

TEST(OpensslDigest, AProcessThatAsksForFipsIsNeverGivenTheDefaultProviders) {
  // A host that turned FIPS on before progcache's first key: BLAKE2b must be fetched under its
  // properties, which refuse it (and SHA-256 without a FIPS provider installed: an error).
  TempDir dir;
  const std::string report = child_report(dir, {{"PCACHE_TEST_ENABLE_FIPS", "1"}});
  EXPECT_EQ(report.find("default provider"), std::string::npos) << report;
  EXPECT_EQ(report.find("blake2b"), std::string::npos) << report;
}

TEST(OpensslDigestChild, DISABLED_Report) {  // run only by the tests above
  const char *out = std::getenv("PCACHE_TEST_DIGEST_OUT");
  if (!out) GTEST_SKIP() << "helper of OpensslDigest.*";
  if (std::getenv("PCACHE_TEST_ENABLE_FIPS")) {
    ASSERT_EQ(EVP_default_properties_enable_fips(nullptr, 1), 1);
  }
  std::string report;
  try {
    report = std::string(progcache::key_hash_name()) + " " +
             (progcache::key_hash_from_default_provider() ? "default provider" : "fetched") + "\n";
    const std::string large(3 << 20, 'x');  // many blocks, and one update larger than the buffer
    for (const auto &[name, bytes] : std::vector<std::pair<std::string, std::string>>{
             {"abc", "abc"}, {"empty", ""}, {"large", large}}) {
      const progcache::ContentDigest d = progcache::content_digest(bytes);
      report += name + " " + progcache::to_hex(progcache::ByteView(d.data(), d.size())) + "\n";
    }
  } catch (const std::exception &e) {
    report += std::string("error ") + e.what() + "\n";
  }
  write_file(out, report);
}

}  // namespace
