// The two lexers the key relies on without NVRTC: the include scan's (core/directives.cpp: which
// header names a text can make NVRTC read) and the lexical facts (core/source_facts.cpp: can a
// text make the output hold the time or its own path).
#include <gtest/gtest.h>

#include <string>

#include "core/directives.hpp"
#include "core/source_facts.hpp"
#include "proc_util.hpp"

using progcache::DirectiveKind;
using progcache::find_directives;
using progcache::lexical_facts;

namespace {

std::vector<std::string> names(const std::string &text) {
  std::vector<std::string> out;
  for (const auto &d : find_directives(text).names) out.push_back(d.name);
  return out;
}

}  // namespace

TEST(Directives, EverySpellingOfADirectiveIsFound) {
  EXPECT_EQ(names("#include \"a.h\"\n"), std::vector<std::string>{"a.h"});
  EXPECT_EQ(names("  %:  include <b.h>\n"), std::vector<std::string>{"b.h"});  // digraph
  EXPECT_EQ(names("?\?=include \"c.h\"\n"), std::vector<std::string>{"c.h"});  // trigraph
  EXPECT_EQ(names("# /* a comment */ include \"d.h\"\n"), std::vector<std::string>{"d.h"});
  EXPECT_EQ(names("#inc\\\nlude \"e.h\"\n"), std::vector<std::string>{"e.h"});    // spliced
  EXPECT_EQ(names("#inc?\?/\nlude \"f.h\"\n"), std::vector<std::string>{"f.h"});  // ??/ splice
  EXPECT_EQ(names("#include_next <g.h>\n#embed \"h.bin\"\n"),
            (std::vector<std::string>{"g.h", "h.bin"}));
  const auto d = find_directives("%:if __has_include(<i.h>)\n%:endif\n");
  ASSERT_EQ(d.names.size(), 1u);
  EXPECT_EQ(d.names[0].kind, DirectiveKind::has_include);
  EXPECT_TRUE(d.names[0].angle);
}

TEST(Directives, CommentsAndLiteralsHoldNoDirective) {
  EXPECT_TRUE(names("// #include \"a.h\"\n/* #include \"b.h\" */\n").empty());
  EXPECT_TRUE(names("const char *s = \"#include \\\"c.h\\\"\";\n").empty());
  EXPECT_TRUE(names("auto r = R\"(\n#include \"d.h\"\n)\";\n").empty());
}

TEST(Directives, HeaderNamesTheScanCannotKnowAreComputed) {
  EXPECT_NE(find_directives("#define H \"a.h\"\n#include H\n").computed, "");
  // A wrapper of __has_include called with an operand built by macros.
  const auto wrapped = find_directives(
      "#define HAS(x) __has_include(x)\n#define OPT \"o.h\"\n#if HAS(OPT)\n#endif\n");
  EXPECT_NE(wrapped.computed, "");
  EXPECT_EQ(wrapped.wrappers, std::vector<std::string>{"HAS"});
  // Called with a header name, the wrapper is a probe.
  const auto literal =
      find_directives("#define HAS(x) __has_include(x)\n#if HAS(\"p.h\")\n#endif\n");
  EXPECT_EQ(literal.computed, "");
  ASSERT_EQ(literal.names.size(), 1u);
  EXPECT_EQ(literal.names[0].name, "p.h");
  // A wrapper of a wrapper is one too, though its body names no __has_include.
  const auto twice = find_directives(
      "#define HAS(x) __has_include(x)\n#define HAS_TOO(y) HAS(y)\n#if HAS_TOO(OPT)\n#endif\n");
  EXPECT_NE(twice.computed, "");
  EXPECT_EQ(twice.wrappers, (std::vector<std::string>{"HAS", "HAS_TOO"}));
  // A call in one file of a wrapper defined in another is found across them (core/include_scan).
  const auto caller = find_directives("#if HAS2(OPT)\n#endif\n");
  EXPECT_EQ(caller.macro_calls, std::vector<std::string>{"HAS2"});
}

// Found by fuzz_include_scan: "#define (x) __has_include(...)" made the empty name a wrapper,
// and the next #define looked for "" in its line for ever (any header could hang every key).
TEST(Directives, ADefineWithoutANameEndsTheScan) {
  const pid_t child = testutil::spawn([] {
    const auto d = find_directives(
        "#define (x) __has_include(<a.h>)\n#define\n#define B(x) __has_include(x)\n");
    return d.wrappers == std::vector<std::string>{"B"} ? 0 : 1;
  });
  EXPECT_EQ(testutil::wait_for_or_kill(child, std::chrono::seconds(20)), 0)
      << "-1: the scan did not end";
}

// Headers anyone may write feed these lexers on every key: each must stay linear in the text.
// Each 4-8 MiB text below took minutes to hours (a search to the end of the line or text for
// every '<', "f(<", R" or wrapper of __has_include); now well under a second. The 60 s limit is
// a liveness check with that margin, not a speed test.
TEST(Directives, TextsThatWereQuadraticAreScannedInLinearTime) {
  const size_t n = size_t(4) << 20;
  std::string wrappers;
  for (int i = 0; wrappers.size() < n; ++i)
    wrappers += "#define W" + std::to_string(i) + "(x) __has_include(x)\n";
  std::string raw;
  while (raw.size() < 2 * n) raw += "R\"x\"\n";
  const std::vector<std::pair<const char *, std::string>> texts = {
      {"a condition of '<'", "#if " + std::string(n, '<') + "\n#endif\n"},
      {"a condition of calls on '<'", "#if " +
                                          [&] {
                                            std::string calls;
                                            while (calls.size() < n) calls += "f(<";
                                            return calls;
                                          }() +
                                          ">\n#endif\n"},
      {"many wrappers of __has_include", wrappers},
      {"R\" without '('", raw},
  };
  for (const auto &[what, text] : texts) {
    const pid_t child = testutil::spawn([&text] {
      (void)find_directives(text);
      (void)lexical_facts(text);
      return 0;
    });
    EXPECT_EQ(testutil::wait_for_or_kill(child, std::chrono::seconds(60)), 0)
        << what << " (-1: not done in 60 s)";
  }
}

TEST(SourceFacts, TheTimeMacrosAreFoundWhereverThePreprocessorWouldSeeThem) {
  EXPECT_TRUE(lexical_facts("x = __TIME__;").time_macro);
  EXPECT_TRUE(lexical_facts("x = __DATE__[0];").time_macro);
  EXPECT_TRUE(lexical_facts("x = __TI\\\nME__;").time_macro);    // backslash splice
  EXPECT_TRUE(lexical_facts("x = __TI?\?/\nME__;").time_macro);  // trigraph splice
  EXPECT_TRUE(lexical_facts("-DSTAMP=__TIME__").time_macro);     // an option
  EXPECT_FALSE(lexical_facts("x = \"__TIME__\";").time_macro);   // a literal
  EXPECT_FALSE(lexical_facts("// __TIME__\n/* __DATE__ */").time_macro);
  EXPECT_FALSE(lexical_facts("auto r = R\"d(__TIME__)d\";").time_macro);
  EXPECT_FALSE(lexical_facts("x = 1__TIME__;").time_macro);  // a pp-number
  EXPECT_FALSE(lexical_facts("__TIME__X, X__TIME__").time_macro);
}

TEST(SourceFacts, TokenPastingThatCouldBuildATimeMacroIsFound) {
  EXPECT_TRUE(lexical_facts("#define T __TI##ME__").uses_time());
  EXPECT_TRUE(lexical_facts("#define T CAT(__DA, TE__)\n#define CAT(a, b) a %:%: b").uses_time());
  // Across texts: the ## in one header, the pieces in another.
  auto all = lexical_facts("#define CAT(a, b) a##b");
  EXPECT_FALSE(all.uses_time());
  all |= lexical_facts("CAT(__TI, ME__)");
  EXPECT_TRUE(all.uses_time());
  // CUB's template parameter _T and a paste are not enough; neither are pieces alone.
  EXPECT_FALSE(lexical_facts("template <class _T> struct X {};\n#define C(a) a##_x").uses_time());
  EXPECT_FALSE(lexical_facts("int TIME_ = 1, ME = 2;").uses_time());
}

TEST(SourceFacts, PathMacrosAreFound) {
  EXPECT_TRUE(lexical_facts("const char *f = __FILE__;").path_macro);
  EXPECT_TRUE(lexical_facts("auto f = __builtin_FILE();").path_macro);
  EXPECT_FALSE(lexical_facts("const char *f = \"__FILE__\";").path_macro);
}
