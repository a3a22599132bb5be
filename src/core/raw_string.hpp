// What the two lexers of the key (core/directives.cpp, core/source_facts.cpp) share about raw
// string literals.
#pragma once

#include <string_view>

namespace progcache {

// Where the '(' of a raw string literal R"delim(...)delim" whose opening quote is at s[quote]
// is, or npos when there is none within the 16 characters a delimiter may have. Looking no
// further keeps a lexer linear: a search to the end made every R" of a text without '(' read
// the rest of it.
inline size_t raw_string_open(std::string_view s, size_t quote) {
  return s.substr(0, quote + 18).find('(', quote + 1);
}

}  // namespace progcache
