// When progcache may skip reading OpenSSL's configuration: only where the file cannot change
// anything (src/util/openssl_init.hpp). The end-to-end check that a configuration which does
// matter is honoured is in tests/cli/cli_test.sh.
#include "util/openssl_init.hpp"

#include <gtest/gtest.h>
#include <openssl/err.h>

#include "scratch.hpp"

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

}  // namespace
