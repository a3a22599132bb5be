// The dlopen flags of the system libraries (src/util/system_library.hpp): libcrypto's and
// SQLite's own symbols bound inside them, except where a sanitizer runtime would end the process
// over it or a preloaded interposer must keep seeing their calls into libc; the others' never.
#include "util/system_library.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

TEST(SystemLibrary, OwnSymbolsBindInsideUnlessSanitizedOrPreloaded) {
  using progcache::Binding;
  using progcache::system_library_open_flags;
  for (Binding binding : {Binding::process_scope, Binding::own_first})
    for (bool sanitizer : {false, true})
      for (bool preloaded : {false, true}) {
        const int flags = system_library_open_flags(binding, sanitizer, preloaded);
        EXPECT_EQ(flags & (RTLD_NOW | RTLD_LOCAL), RTLD_NOW | RTLD_LOCAL);
        EXPECT_EQ((flags & RTLD_DEEPBIND) != 0,
                  binding == Binding::own_first && !sanitizer && !preloaded)
            << "sanitizer " << sanitizer << ", preloaded " << preloaded;
      }
}
