// The include scanner's lexer: the header names a text can make NVRTC read or probe
// (#include, #include_next, #embed, __has_include, and macros that wrap __has_include), found
// regardless of #if. Used by pcache_make_key and `progcache deps`, which key a program without
// compiling it; a compile keys what NVRTC was seen to do instead (core/observation.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace progcache {

enum class DirectiveKind : uint8_t { include = 0, include_next = 1, has_include = 2, embed = 3 };

struct Directive {
  DirectiveKind kind = DirectiveKind::include;
  bool angle = false;
  std::string name;
  bool operator==(const Directive &) const = default;
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
  bool operator==(const Directives &) const = default;
};

// Every directive of text. Directives may be introduced by '#', the digraph "%:" or the trigraph
// "??="; lines may be spliced by a backslash or the trigraph "??/". Runs the fast scan
// (core/text_scan.hpp), which gives what the reference below gives.
Directives find_directives(std::string_view text);

// The reference: every line of the text cleaned (comments replaced, literals marked) and parsed.
// The fast scan falls back on it for the texts it does not take, and the tests hold the two equal.
Directives find_directives_reference(std::string_view text);

// The spaces a directive's line may hold between its tokens (a newline ends the line).
inline bool is_directive_space(char c) {
  return c == ' ' || c == '\t' || c == '\f' || c == '\v' || c == '\r';
}

// The directive names parse_line acts on (include, if, define...): a line of any other directive
// changes nothing.
bool is_parsed_directive(std::string_view name);

// The directives of a text, one line at a time: the lines must be given in order, each from its
// start (offset 0, or just after a newline outside comments and raw strings) in the text without
// its line splices. Lines that are not directives may be left out: they change nothing.
class DirectiveParser {
 public:
  DirectiveParser();
  ~DirectiveParser();
  DirectiveParser(const DirectiveParser &) = delete;
  DirectiveParser &operator=(const DirectiveParser &) = delete;

  // Parses the line of `spliced` that starts at `start`; returns where it ends (the newline
  // outside comments and literals that ends it, or spliced.size()).
  size_t parse_line(std::string_view spliced, size_t start);
  // Whether parsing the directive `name`, the rest of whose line (after the name, to the newline)
  // is `line`, could change what is found: false for a name it ignores, a #define that names no
  // wrapper, a condition with no call or header name. A line that may go on past its newline (a
  // block comment or a raw string in it) is true, unless it is a #define, no wrapper is known and
  // `rest`, the text from `line` on to its end, has no __has_include (wherever such a line ends,
  // it ends in rest). Every call of one parser must give a rest that ends where the text does
  // (a search of it is kept for the calls after).
  bool may_act_on(std::string_view name, std::string_view line, std::string_view rest) const;
  Directives finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace progcache
