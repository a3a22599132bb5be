// The include scanner's lexer: the header names a text can make NVRTC read or probe
// (#include, #include_next, #embed, __has_include, and macros that wrap __has_include), found
// regardless of #if. Used by pcache_make_key and `progcache deps`, which key a program without
// compiling it; a compile keys what NVRTC was seen to do instead (core/observation.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace progcache {

enum class DirectiveKind : uint8_t { include = 0, include_next = 1, has_include = 2, embed = 3 };

struct Directive {
  DirectiveKind kind = DirectiveKind::include;
  bool angle = false;
  std::string name;
};

struct Directives {
  std::vector<Directive> names;
  // The first directive whose header name the scan cannot know without running the
  // preprocessor (a computed #include, a __has_include operand built by macros); "" if none.
  std::string computed;
  // Function-like macros this text defines that wrap __has_include, and the function-like
  // macros its #if lines call with an operand that is not a header name: a call in one file of
  // a wrapper from another is computed too (core/include_scan.cpp checks across files).
  std::vector<std::string> wrappers;
  std::vector<std::string> macro_calls;
};

// Every directive of text. Directives may be introduced by '#', the digraph "%:" or the trigraph
// "??="; lines may be spliced by a backslash or the trigraph "??/".
Directives find_directives(std::string_view text);

}  // namespace progcache
