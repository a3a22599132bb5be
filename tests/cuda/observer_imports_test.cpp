// Which imports of an NVRTC library progcache may leave unobserved: a fortified variant
// (_FORTIFY_SOURCE) of a harmless function is harmless (a test NVRTC built with the project's
// hardening imports __fprintf_chk, and every compile through it became uncacheable); one of a
// function that reads files or the environment never is.
#include <gtest/gtest.h>

#include "cuda/nvrtc_observer.hpp"

using progcache::is_harmless_import;

TEST(ObserverImports, FortifiedVariantsAreAsHarmlessAsWhatTheyCheck) {
  EXPECT_TRUE(is_harmless_import("fprintf"));
  EXPECT_TRUE(is_harmless_import("__fprintf_chk"));
  EXPECT_TRUE(is_harmless_import("__memcpy_chk"));
  EXPECT_TRUE(is_harmless_import("__snprintf_chk"));
  // Reads through a descriptor or FILE, whose opening is recorded, like read and fread.
  EXPECT_TRUE(is_harmless_import("__read_chk"));
  EXPECT_TRUE(is_harmless_import("__fread_chk"));
  for (const char *recorded :
       {"__realpath_chk", "__readlink_chk", "__getcwd_chk", "__open_2", "__chk", "__getenv_chk"})
    EXPECT_FALSE(is_harmless_import(recorded)) << recorded;
}
