// The fast scan (core/text_scan.hpp) against the reference lexers it replaces: the same
// directives and lexical facts for every text, on every version of the kernels this CPU runs
// (AVX-512, AVX2, portable); and the kernels (core/scan_blocks.hpp) against their definitions.
#include "core/text_scan.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <random>
#include <string>
#include <vector>

#include "core/directives.hpp"
#include "core/lex_rules.hpp"
#include "core/scan_blocks.hpp"
#include "core/source_facts.hpp"
#include "proc_util.hpp"

using namespace progcache;

namespace {

using scan_blocks::Level;

// The kernels' versions this CPU runs: each is held to the same answers.
std::vector<Level> levels() {
  std::vector<Level> out;
  for (Level l : {Level::portable, Level::avx2, Level::avx512})
    if (l <= scan_blocks::cpu_level()) out.push_back(l);
  return out;
}

scan_blocks::Block block_at(std::string_view t, size_t at) {
  scan_blocks::Block b;
  scan_blocks::kernels().block(t, at, &b);
  return b;
}

// Runs the rest of a scope on one version of the kernels, then puts the CPU's back.
struct Limit {
  explicit Limit(Level l) { scan_blocks::limit_level(l); }
  ~Limit() { scan_blocks::limit_level(Level::avx512); }
};

std::string describe(const TextFacts &f) {
  std::string out = "t" + std::to_string(f.lexical.time_macro) + " p" +
                    std::to_string(f.lexical.time_piece) + " a" + std::to_string(f.lexical.paste) +
                    " f" + std::to_string(f.lexical.path_macro);
  for (const Directive &d : f.directives.names)
    out += "\n" + std::to_string(int(d.kind)) + (d.angle ? " <" : " \"") + d.name;
  out += "\ncomputed " + f.directives.computed;
  for (const std::string &w : f.directives.wrappers) out += "\nwrapper " + w;
  for (const std::string &c : f.directives.macro_calls) out += "\ncall " + c;
  return out;
}

std::string reference(std::string_view text) {
  return describe({find_directives_reference(text), lexical_facts_reference(text)});
}

// Texts made of the pieces the lexers tell apart, in random order: directives in every
// spelling, comments, literals and raw strings opened and closed anywhere, splices, pp-numbers,
// the macros and their pieces, and bytes of no class.
std::string random_text(std::mt19937 &rng) {
  static const std::vector<std::string> pieces = {"#",
                                                  "##",
                                                  "%:",
                                                  "%:%:",
                                                  "#include <a.h>",
                                                  "#include \"b.h\"",
                                                  "# include <c/d.h>",
                                                  "#if __has_include(<e.h>)",
                                                  "#define W(x) __has_include(x)",
                                                  "#if W(<f.h>)",
                                                  "#if W(X)",
                                                  "#define H \"g.h\"",
                                                  "#include H",
                                                  "#embed <h.bin>",
                                                  "#include_next <i.h>",
                                                  "#elif V(<j>)",
                                                  "#define O __has_include(\"k.h\")",
                                                  "#define W2(y) W(y)",
                                                  "#if W2(Y)",
                                                  "#if ",
                                                  "#elif ",
                                                  "#define ",
                                                  "<x/y.h>",
                                                  "\"q.h\"",
                                                  "__has_include",
                                                  "W",
                                                  "W2",
                                                  "HAS",
                                                  "__DATE__",
                                                  "__TIME__",
                                                  "__TIMESTAMP__",
                                                  "__FILE__",
                                                  "__BASE_FILE__",
                                                  "__builtin_FILE",
                                                  "__builtin_source_location",
                                                  "__FILE_NAME__",
                                                  "DA",
                                                  "TE_",
                                                  "__T",
                                                  "_DA",
                                                  "IME",
                                                  "DATE",
                                                  "E__",
                                                  "_T",
                                                  "AT",
                                                  "MED",
                                                  "__device__",
                                                  "x",
                                                  "abc",
                                                  "_x",
                                                  "R",
                                                  "u8",
                                                  "0",
                                                  "7",
                                                  "1'2",
                                                  "1e+",
                                                  "0x1p-",
                                                  ".5",
                                                  "R\"(",
                                                  ")\"",
                                                  "R\"d(",
                                                  ")d\"",
                                                  "u8R\"(",
                                                  "LR\"x(",
                                                  "xR\"(",
                                                  "\"",
                                                  "'",
                                                  "\\",
                                                  "\\\n",
                                                  "\\\r\n",
                                                  "/*",
                                                  "*/",
                                                  "//",
                                                  "\n",
                                                  "\n",
                                                  "\n",
                                                  "\r\n",
                                                  " ",
                                                  " ",
                                                  "\t",
                                                  "\f",
                                                  "\v",
                                                  "(",
                                                  ")",
                                                  "<",
                                                  ">",
                                                  ",",
                                                  "?",
                                                  "%",
                                                  ":",
                                                  "/",
                                                  "*",
                                                  "\xff",
                                                  std::string(1, '\0')};
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1), count(0, 90);
  std::string text;
  for (size_t n = count(rng); n > 0; --n) text += pieces[pick(rng)];
  return text;
}

void expect_same_as_reference(const std::string &text) {
  const std::string want = reference(text);
  for (Level level : levels()) {
    Limit limit(level);
    ASSERT_EQ(describe(scan_text(text, true)), want)
        << "level " << int(level) << ", text: " << ::testing::PrintToString(text);
    TextFacts lexical_only;
    lexical_only.lexical = scan_text(text, false).lexical;
    ASSERT_EQ(describe(lexical_only), describe({{}, lexical_facts_reference(text)}));
  }
}

// The definition scan_blocks::events implements, one byte at a time.
uint64_t events_by_definition(std::string_view t, size_t at) {
  auto ident = [&](size_t i) { return i < t.size() && lex::ident_char(t[i]); };
  auto in = [&](size_t i, std::string_view set) {
    return i < t.size() && set.find(t[i]) != std::string_view::npos;
  };
  uint64_t m = 0;
  for (size_t k = 0; k < 64 && at + k < t.size(); ++k) {
    const size_t i = at + k;
    const bool start = i == 0 || !ident(i - 1);
    const bool event = in(i, "/\"'#%") || (start && in(i, "0123456789")) ||
                       (start && in(i, "DATEIM") && in(i + 1, "_DATEIM")) ||
                       (start && t[i] == '_' && in(i + 1, "_DT"));
    if (event) m |= uint64_t(1) << k;
  }
  return m;
}

}  // namespace

TEST(ScanBlocks, EventsAreTheBytesTheDefinitionNames) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 300; ++round) {
    std::string t(size_t(byte(rng)) + 1, '\0');
    // Half the texts random bytes, half drawn from the classes' edges.
    static const std::string edges = "/\"'#%09_DATEIMTaz@[`{\x7f\x80 \n";
    for (char &c : t) c = round % 2 ? char(byte(rng)) : edges[size_t(byte(rng)) % edges.size()];
    for (size_t at = 0; at < t.size(); at += 1 + size_t(byte(rng)) % 70)
      for (Level level : levels()) {
        Limit limit(level);
        ASSERT_EQ(block_at(t, at).events, events_by_definition(t, at))
            << "level " << int(level) << " at " << at << " of " << ::testing::PrintToString(t);
      }
  }
}

TEST(ScanBlocks, TheShapeFindsTrigraphPairsAndSplicesAnywhere) {
  for (size_t size : {2, 31, 32, 33, 64, 65, 100, 200}) {
    for (size_t at = 0; at + 2 <= size; ++at) {
      for (Level level : levels()) {
        Limit limit(level);
        std::string t(size, 'x');
        EXPECT_FALSE(scan_blocks::kernels().shape_of(t).trigraph_pair);
        t[at] = t[at + 1] = '?';
        EXPECT_TRUE(scan_blocks::kernels().shape_of(t).trigraph_pair) << size << " " << at;
        EXPECT_FALSE(scan_blocks::kernels().shape_of(t).line_splice);
        t[at] = '\\';
        t[at + 1] = at % 2 ? '\n' : '\r';
        EXPECT_TRUE(scan_blocks::kernels().shape_of(t).line_splice) << size << " " << at;
        EXPECT_FALSE(scan_blocks::kernels().shape_of(t).trigraph_pair);
      }
    }
  }
}

TEST(ScanBlocks, TheLevelGlibcGivesIsTheOneCpuidGives) {
  EXPECT_EQ(int(scan_blocks::cpu_level()), int(scan_blocks::cpuid_level()));
}

TEST(ScanBlocks, FindAnyOfFindsTheFirstOfItsBytesFromAnyOffset) {
  for (size_t size : {0, 1, 31, 32, 33, 63, 64, 65, 130}) {
    for (size_t hit = 0; hit <= size; ++hit) {
      std::string t(size, 'x');
      if (hit < size) t[hit] = "\"\n\\"[hit % 3];
      for (size_t from = 0; from <= size; from += 1 + from / 8) {
        const size_t want = hit < size && hit >= from ? hit : size;
        for (Level level : levels()) {
          Limit limit(level);
          ASSERT_EQ(scan_blocks::kernels().find_any_of(t, from, '"', '\n', '\\'), want)
              << "level " << int(level) << " size " << size << " hit " << hit << " from " << from;
        }
      }
    }
  }
}

TEST(ScanBlocks, ABlockMarksItsNewlinesQuotesAndBackslashes) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> byte(0, 255);
  static const std::string edges = "\n\"'\\x\0";
  for (int round = 0; round < 200; ++round) {
    std::string t(size_t(byte(rng)) + 1, '\0');
    for (char &c : t) c = edges[size_t(byte(rng)) % edges.size()];
    for (size_t at = 0; at < t.size(); at += 1 + size_t(byte(rng)) % 70) {
      uint64_t newline = 0, dquote = 0, squote = 0, backslash = 0;
      for (size_t k = 0; k < 64 && at + k < t.size(); ++k) {
        newline |= uint64_t(t[at + k] == '\n') << k;
        dquote |= uint64_t(t[at + k] == '"') << k;
        squote |= uint64_t(t[at + k] == '\'') << k;
        backslash |= uint64_t(t[at + k] == '\\') << k;
      }
      for (Level level : levels()) {
        Limit limit(level);
        const scan_blocks::Block b = block_at(t, at);
        ASSERT_EQ(b.newline, newline) << int(level) << " " << at;
        ASSERT_EQ(b.dquote, dquote) << int(level) << " " << at;
        ASSERT_EQ(b.squote, squote) << int(level) << " " << at;
        ASSERT_EQ(b.backslash, backslash) << int(level) << " " << at;
      }
    }
  }
}

TEST(ScanBlocks, FindPairFindsTheFirstPairFromAnyOffset) {
  for (size_t size : {0, 1, 2, 32, 33, 34, 64, 65, 66, 130}) {
    for (size_t hit = 0; hit + 1 <= size; ++hit) {
      std::string t(size, '*');  // a run of the pair's first byte, as in "***/"
      if (hit + 1 < size) t[hit + 1] = '/';
      for (size_t from = 0; from <= size; from += 1 + from / 8) {
        const size_t want = hit + 1 < size && hit >= from ? hit : size;
        for (Level level : levels()) {
          Limit limit(level);
          ASSERT_EQ(scan_blocks::kernels().find_pair(t, from, '*', '/'), want)
              << "level " << int(level) << " size " << size << " hit " << hit << " from " << from;
        }
      }
    }
  }
}

TEST(TextScan, GivesWhatTheReferenceLexersGiveForRandomTexts) {
  std::mt19937 rng(34);
  for (int i = 0; i < 6000; ++i) expect_same_as_reference(random_text(rng));
}

TEST(TextScan, GivesWhatTheReferenceLexersGiveForRandomBytes) {
  std::mt19937 rng(35);
  std::uniform_int_distribution<int> byte(0, 255), size(0, 700);
  for (int i = 0; i < 400; ++i) {
    std::string t(size_t(size(rng)), '\0');
    for (char &c : t) c = char(byte(rng));
    expect_same_as_reference(t);
  }
}

// The cases where the fast scan's reading could part from the reference's, each named.
TEST(TextScan, GivesWhatTheReferenceLexersGiveAtTheirEdges) {
  for (const std::string &text : std::vector<std::string>{
           "a /* one\n two */ #include <after_comment.h>\n",  // not a directive
           "/* one\n two */ # include <starts_line.h>\n",     // a directive
           "/**/ /**/\t#include <two_comments.h>\n",
           "\"unterminated\n#include <after_literal.h>\n",
           "R\"(\n#include <in_raw_string.h>\n)\"\n#include <after_raw.h>\n",
           "1e+R\"(\n#include <number_then_literal.h>\n)\"\n",  // no raw string
           "x = 1'000;\n#include <digit_separator.h>\n",
           "char c = '#';\n#include <char_literal.h>\n",
           "#define P(a, b) a##b\nP(__TI, ME__)\n",  // paste and pieces
           "%:define Q(a) a %:%: b\nDATE\n",
           "// #include <in_line_comment.h>\n#include <real.h>\n",
           "#define A \\\n __DATE__\n#include \\\n <spliced.h>\n",       // splices removed first
           "\"a\\\\\\\n\n#include <made_by_a_splice.h>\n\"",             // falls back: \ before \n
           "?\?=include <trigraph.h>\n",                                 // falls back: trigraphs
           "#if X < Y\n#if A <probed.h>\n#elif B > \"probed_too.h\"\n",  // no call
           "#define W(x) __has_include(x)\n#define W2(y) W(y)\n#if W2(Y)\n",  // wrapper's wrapper
           "#if defined(A) && defined (B) || (C)\n#if (D)\n#elif F (1)\n",    // what is a call
           // Lines whose comments and literals end with them, and lines they go on past:
           "#if X == \"probed.h\" // (comment)\n#if defined(A) // G(1)\n",
           "#define D 1 // __has_include(<in_comment.h>)\n#define E '\"' \"(\"\n",
           "#if A /* a\n b */ (1)\n#if B /**/ <c.h>\n",
           "#if C R\"x(\n)x\" (2)\n#define W(x) __has_include(x) // wrapper\n#if W(<d.h>)\n",
           // A #define of no wrapper whose line goes on is parsed only if a __has_include
           // follows it anywhere; the search is kept, and made again once passed:
           "#define T /* x\n */ 1\n#define U /* a */ __has_include(<u.h>)\n",
           "#define A /* c */ 1\n#if __has_include(<x.h>)\n#endif\n#define B /* c\n */ "
           "__has_include(<y.h>)\n#define C /* d */ 2\n",
           "#define R R\"(\n)\" __has_include(<after_raw.h>)\n#define V /* */ 1 // __has_include\n",
           "#define W(x) __has_include(x)\n#define X /* e */ W(<w.h>)\n",  // a wrapper known
           std::string(63, ' ') + "__TIME__",                              // across a block's end
           std::string(64, ';') + "_DATE__" + std::string(60, ' ') + "##",
       })
    expect_same_as_reference(text);
}

// Whether the splices' removal left a backslash before a newline (the texts the fast scan hands
// to the reference) is said by without_line_splices: for every text of up to 8 bytes of \, CR,
// LF and a letter, what a search of its result finds.
TEST(TextScan, RemovingSplicesSaysWhetherItLeftABackslashBeforeANewline) {
  const char alphabet[] = {'\\', '\r', '\n', 'a'};
  for (size_t size = 0; size <= 8; ++size)
    for (size_t n = 0; n < (size_t(1) << (2 * size)); ++n) {
      std::string text;
      for (size_t k = 0; k < size; ++k) text += alphabet[(n >> (2 * k)) & 3];
      bool said = !text.empty();  // set to what it finds, whatever it was before
      const std::string result = without_line_splices(text, &said);
      ASSERT_EQ(said, result.find("\\\n") != std::string::npos) << testing::PrintToString(text);
    }
}

TEST(TextScan, FindsAMacroAtEveryOffsetOfABlock) {
  for (size_t at = 0; at < 140; ++at) {
    const std::string text = std::string(at, ' ') + "__TIME__ + 1";
    EXPECT_TRUE(lexical_facts(text).time_macro) << at;
    const std::string spliced = std::string(at, ';') + "\n#include <x.h>\n";
    ASSERT_EQ(find_directives(spliced).names.size(), 1u) << at;
  }
}

// A header of many block comments costs the scan no memory of its own: a list of every comment
// passed grew to several times the text (~200 MB for 40 MB of "/**/ "). In a child, whose peak
// resident size is its own.
TEST(TextScan, ManyCommentsCostNoMemory) {
  const pid_t child = testutil::spawn([] {
    const std::string comment = "/**/ ", directive = "\n#include <after_comments.h>\n";
    const size_t count = 8 << 20;
    std::string text;
    text.reserve(count * comment.size() + directive.size());
    for (size_t i = 0; i < count; ++i) text += comment;
    text += directive;
    struct rusage before, after;
    ::getrusage(RUSAGE_SELF, &before);
    const TextFacts f = scan_text(text, true);
    ::getrusage(RUSAGE_SELF, &after);
    if (f.directives.names.size() != 1) return 2;  // the directive after them, found
    const long grown = (after.ru_maxrss - before.ru_maxrss) * 1024;
    return grown < long(text.size() / 4) ? 0 : 1;
  });
  EXPECT_EQ(testutil::wait_for_or_kill(child, std::chrono::seconds(300)), 0)
      << "1: the scan's peak grew by a quarter of the text or more; 2: the directive was missed";
}
