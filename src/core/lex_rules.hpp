// The lexical facts' token rules (core/source_facts.hpp), shared by the reference lexer and the
// fast scan (core/text_scan.cpp), which must agree with it byte for byte: literals, raw strings,
// pp-numbers and the identifiers that name a time or path macro.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/raw_string.hpp"
#include "core/source_facts.hpp"

namespace progcache::lex {

// One table lookup a byte: the lexers ask of every byte of a source.
struct CharClasses {
  bool start[256] = {}, part[256] = {};
  constexpr CharClasses() {
    for (int c = 0; c < 256; ++c) {
      start[c] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
      part[c] = start[c] || (c >= '0' && c <= '9');
    }
  }
};
inline constexpr CharClasses kClasses;

inline bool ident_start(char c) {
  return kClasses.start[static_cast<unsigned char>(c)];
}
inline bool ident_char(char c) {
  return kClasses.part[static_cast<unsigned char>(c)];
}

// Skips a string or character literal starting at s[i] (the quote); returns the index after it
// (after the newline that ends an unterminated one; may be s.size() + 1).
inline size_t skip_literal(std::string_view s, size_t i) {
  const char quote = s[i];
  for (++i; i < s.size() && s[i] != quote && s[i] != '\n'; ++i)
    if (s[i] == '\\') ++i;
  return i + 1;
}

// A raw string R"delim( ... )delim" whose R is at s[i]; returns the index after it, or i when
// it is not one.
size_t skip_raw_string(std::string_view s, size_t i);

// The end of the pp-number whose first digit is s[i]: it may hold letters, '.', digit
// separators and the signs of an exponent.
inline size_t number_end(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    const char p = s[i - 1], c = s[i];
    if (!(ident_char(c) || c == '.' || c == '\'' ||
          ((c == '+' || c == '-') && (p == 'e' || p == 'E' || p == 'p' || p == 'P'))))
      break;
  }
  return i;
}

// The encoding prefixes a raw string may have (R, u8R, uR, UR, LR).
inline bool raw_prefix(std::string_view id) {
  return id == "R" || id == "u8R" || id == "uR" || id == "UR" || id == "LR";
}

// What identifier id tells of a text: a time or path macro, or a piece pasting could make one of.
void classify(std::string_view id, SourceFacts *f);

}  // namespace progcache::lex
