// What a text NVRTC compiles (a source, a header, an option) can make depend on something
// other than its bytes: the time (__DATE__, __TIME__) and the file's own path (__FILE__).
// Found by a lexer that sees identifiers as the preprocessor does after its first phases:
// backslash and trigraph line splices removed, comments and literals skipped (docs/keys.md).
#pragma once

#include <string>
#include <string_view>

namespace progcache {

struct SourceFacts {
  bool time_macro = false;  // __DATE__, __TIME__ or __TIMESTAMP__ as an identifier
  bool time_piece = false;  // an identifier token pasting could make one of them from
  bool paste = false;       // the ## operator (or %:%:, ??=??=)
  bool path_macro = false;  // __FILE__, __BASE_FILE__, __FILE_NAME__, __builtin_FILE...

  bool operator==(const SourceFacts &) const = default;
  SourceFacts &operator|=(const SourceFacts &o) {
    time_macro |= o.time_macro;
    time_piece |= o.time_piece;
    paste |= o.paste;
    path_macro |= o.path_macro;
    return *this;
  }
  // The facts of every text of a compile together: can its output hold the time of day?
  bool uses_time() const { return time_macro || (paste && time_piece); }
};

// Phase two: text without its line splices (a backslash, then a newline or CR-newline). The
// directives' lexer and this one both start from it. *backslash_newline, when given, is set to
// whether the result holds a backslash before a newline: only a splice's removal brings the two
// together (every one in the text is a splice), so the copy need not be searched for them.
std::string without_line_splices(std::string_view text, bool *backslash_newline = nullptr);

// The facts of text; trigraph splices are honoured and ignored both (NVRTC reads trigraphs only
// under -std=c++03/c++14), so that either reading that names a macro is found. Runs the fast
// scan (core/text_scan.hpp), which gives what the reference lexer below gives.
SourceFacts lexical_facts(std::string_view text);
// The reference lexer, one byte at a time: the fast scan falls back on it for the texts it does
// not take (trigraphs), and the tests hold the two equal.
SourceFacts lexical_facts_reference(std::string_view text);

}  // namespace progcache
