// The bytes of a text the fast scan (core/text_scan.cpp) must stop at, found 64 at a time: with
// AVX-512 or AVX2 where the CPU has it (two table lookups classify a vector of bytes), one byte
// at a time elsewhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace progcache::scan_blocks {

// What decides whether the fast scan can read a text as it is.
struct TextShape {
  bool trigraph_pair = false;  // "??" somewhere: a trigraph may change the text
  bool line_splice = false;    // a backslash before a CR or LF: a line may be spliced
};

// 64 bytes of a text, as the fast scan sees them: bit k stands for the byte at + k, and bits
// past the end of the text are clear.
struct Block {
  // The bytes the lexers act on:
  //  - / " ' # %: comments, literals, paste and the directives' marks;
  //  - a digit after a byte that is not an identifier's: a pp-number starts;
  //  - an identifier's first byte that may start a time or path macro or a piece of one: '_'
  //    before '_', 'D' or 'T'; one of DATEIM before another of _DATEIM.
  // Every other byte is one the lexers pass over.
  uint64_t events = 0;
  // The bytes that end a comment's or a literal's run: \n, ", ' and the backslash.
  uint64_t newline = 0, dquote = 0, squote = 0, backslash = 0;
};

// The operations, each in the version the CPU runs best; all versions give the same
// answers (the tests compare them).
struct Kernels {
  TextShape (*shape_of)(std::string_view text);
  void (*block)(std::string_view text, size_t at, Block *out);  // at < text.size()
  // The first index from `from` on where text holds a, b or c; text.size() when none does:
  // through a literal at the speed of memchr (a byte loop made a long one the scan's cost).
  size_t (*find_any_of)(std::string_view text, size_t from, char a, char b, char c);
  // The first index from `from` on where text holds a then b ("*/"); text.size() when none.
  size_t (*find_pair)(std::string_view text, size_t from, char a, char b);
};

// The CPU's kernels (AVX-512 BW, AVX2, else portable), chosen when first asked for.
const Kernels &kernels();

// The kernels' versions, in the order of what they need of the CPU.
enum class Level { portable, avx2, avx512 };
// The best version this CPU runs, as glibc found at its start-up (2.33 on, <sys/platform/x86.h>):
// CPUID costs 20-35 us a call in a VM here, and cpuid_level makes four (issue #34's fresh
// processes). Where glibc does not say, cpuid_level's answer.
Level cpu_level();
// The same found by CPUID and XGETBV (the tests compare the two).
Level cpuid_level();
// Tests: kernels() gives at most `level`'s version (the CPU's best when it is higher).
void limit_level(Level level);

}  // namespace progcache::scan_blocks
