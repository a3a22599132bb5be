#include "core/source_facts.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>

#include "core/lex_rules.hpp"

namespace progcache {
namespace {

using lex::ident_char;
using lex::ident_start;

// The time macros' pieces that token pasting could join into one (every substring of two or
// more characters that is not only underscores). "_T" and "_D" are left out: CUB names template
// parameters so, and a paste needs the rest of the name too ("IME__", "ATE__"), which is kept.
const std::unordered_set<std::string> &time_pieces() {
  static const std::unordered_set<std::string> pieces = [] {
    std::unordered_set<std::string> p;
    for (const std::string name : {"__DATE__", "__TIME__"})
      for (size_t i = 0; i < name.size(); ++i)
        for (size_t n = 2; i + n <= name.size(); ++n) {
          const std::string s = name.substr(i, n);
          if (s == name || s.find_first_not_of('_') == std::string::npos) continue;
          if (s == "_T" || s == "_D") continue;
          p.insert(s);
        }
    return p;
  }();
  return pieces;
}

// Phases one and two: trigraphs replaced (when asked) and line splices removed.
std::string spliced(std::string_view text, bool trigraphs) {
  if (!trigraphs) return without_line_splices(text);
  std::string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '?' && i + 2 < text.size() && text[i + 1] == '?') {
      static const char kFrom[] = "=/'()!<>-", kTo[] = "#\\^[]|{}~";
      if (const char *at = std::strchr(kFrom, text[i + 2]); at && *at) {
        c = kTo[at - kFrom];
        i += 2;
      }
    }
    if (c == '\\') {
      size_t j = i + 1;
      if (j < text.size() && text[j] == '\r') ++j;
      if (j < text.size() && text[j] == '\n') {
        i = j;
        continue;
      }
    }
    s += c;
  }
  return s;
}

SourceFacts lex_text(std::string_view s) {
  SourceFacts f;
  for (size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      const size_t nl = s.find('\n', i);
      i = nl == std::string::npos ? s.size() : nl;
    } else if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
    } else if (c == '"' || c == '\'') {
      i = lex::skip_literal(s, i);
    } else if (c == '#' && i + 1 < s.size() && s[i + 1] == '#') {
      f.paste = true;
      i += 2;
    } else if (c == '%' && s.compare(i, 4, "%:%:") == 0) {
      f.paste = true;
      i += 4;
    } else if (c >= '0' && c <= '9') {
      i = lex::number_end(s, i);
    } else if (ident_start(c)) {
      size_t j = i;
      while (j < s.size() && ident_char(s[j])) ++j;
      const std::string_view id(s.data() + i, j - i);
      // An encoding prefix (R, u8R, LR...) before a raw string, or before a plain literal.
      if (j < s.size() && s[j] == '"' && lex::raw_prefix(id)) {
        const size_t after = lex::skip_raw_string(s, j - 1);
        if (after != j - 1) {
          i = after;
          continue;
        }
      }
      lex::classify(id, &f);
      i = j;
    } else {
      ++i;
    }
  }
  return f;
}

}  // namespace

size_t lex::skip_raw_string(std::string_view s, size_t i) {
  if (i + 1 >= s.size() || s[i + 1] != '"') return i;
  const size_t open = raw_string_open(s, i + 1);
  if (open == std::string_view::npos) return i;
  const std::string close = ")" + std::string(s.substr(i + 2, open - (i + 2))) + "\"";
  const size_t end = s.find(close, open + 1);
  return end == std::string_view::npos ? s.size() : end + close.size();
}

void lex::classify(std::string_view id, SourceFacts *f) {
  if (id == "__DATE__" || id == "__TIME__" || id == "__TIMESTAMP__") f->time_macro = true;
  if (id == "__FILE__" || id == "__BASE_FILE__" || id == "__FILE_NAME__" ||
      id == "__builtin_FILE" || id == "__builtin_FILE_NAME" || id == "__builtin_source_location")
    f->path_macro = true;
  // Every piece is made of the letters of __DATE__ and __TIME__: most identifiers are not.
  if (id.size() <= 8 && id.find_first_not_of("_DATEIM") == std::string_view::npos &&
      time_pieces().count(std::string(id)))
    f->time_piece = true;
}

std::string without_line_splices(std::string_view text, bool *backslash_newline) {
  bool joined = false;
  std::string s;
  s.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const void *at = std::memchr(text.data() + i, '\\', text.size() - i);
    const size_t b = at ? size_t(static_cast<const char *>(at) - text.data()) : text.size();
    s.append(text, i, b - i);  // the run up to the next backslash, as it is
    if (b == text.size()) break;
    size_t j = b + 1;
    if (j < text.size() && text[j] == '\r') ++j;
    if (j < text.size() && text[j] == '\n') {
      i = j + 1;
      joined |= !s.empty() && s.back() == '\\' && i < text.size() && text[i] == '\n';
    } else {
      s += '\\';
      i = b + 1;
    }
  }
  if (backslash_newline) *backslash_newline = joined;
  return s;
}

SourceFacts lexical_facts_reference(std::string_view text) {
  SourceFacts f = lex_text(spliced(text, false));
  if (text.find("??") != std::string_view::npos) f |= lex_text(spliced(text, true));
  return f;
}

}  // namespace progcache
