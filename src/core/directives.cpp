#include "core/directives.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <set>
#include <utility>

#include "core/lex_rules.hpp"
#include "core/raw_string.hpp"
#include "core/source_facts.hpp"

namespace progcache {
namespace {

using lex::ident_char;

// The directives whose line is a condition (scan_condition reads them).
bool is_condition(std::string_view name) {
  return name == "if" || name == "elif" || name == "elifdef" || name == "elifndef";
}

// Phase one as far as directives care: the trigraphs "??=" (#) and "??/" (\). Replaced whether
// or not NVRTC reads trigraphs (-std=c++03/c++14 only): a directive found for nothing costs a
// needless dependency at most.
std::string without_trigraphs(std::string_view text) {
  std::string s(text);
  if (s.find("??") == std::string::npos) return s;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '?' && i + 2 < s.size() && s[i + 1] == '?' &&
        (s[i + 2] == '=' || s[i + 2] == '/')) {
      out += s[i + 2] == '=' ? '#' : '\\';
      i += 2;
      continue;
    }
    out += s[i];
  }
  return out;
}

// The bytes clean_source looks at one by one: the rest, outside a number, are copied as runs
// (the scan of a large source ran at ~150 MB/s copying every byte alone: bench/analysis.md).
struct PlainBytes {
  bool special[256] = {};
  constexpr PlainBytes() {
    for (unsigned char c : std::string_view("/\"'R0123456789\n")) special[c] = true;
  }
};
constexpr PlainBytes kPlain;

// One line of s (line splices already removed) from `from`, a line start, to the newline that
// ends it outside comments and raw strings: comments replaced by a space, the bytes inside
// string and character literals (where identifiers are not macros) marked in *literal. Returns
// where the line ends (its newline, or s.size()).
size_t clean_line(std::string_view s, size_t from, std::string *out, std::vector<bool> *literal) {
  out->clear();
  literal->clear();
  auto emit = [&](char c, bool lit) {
    *out += c;
    literal->push_back(lit);
  };
  bool in_number = false;
  for (size_t i = from; i < s.size();) {
    if (!in_number && !kPlain.special[static_cast<unsigned char>(s[i])]) {
      size_t end = i + 1;
      while (end < s.size() && !kPlain.special[static_cast<unsigned char>(s[end])]) ++end;
      out->append(s, i, end - i);
      literal->resize(literal->size() + (end - i), false);
      i = end;
      continue;
    }
    const char c = s[i];
    const char prev = out->empty() ? '\n' : out->back();
    if (in_number) {
      const bool exponent_sign =
          (c == '+' || c == '-') && (prev == 'e' || prev == 'E' || prev == 'p' || prev == 'P');
      if (ident_char(c) || c == '.' || c == '\'' || exponent_sign) {
        emit(c, false);
        ++i;
        continue;
      }
      in_number = false;
    }
    if (c == '\n') return i;
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '/') {
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (c == '/' && i + 1 < s.size() && s[i + 1] == '*') {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      emit(' ', false);
      continue;
    }
    if (c >= '0' && c <= '9' && !ident_char(prev)) {
      in_number = true;
      emit(c, false);
      ++i;
      continue;
    }
    // Raw string literal: R"delim( ... )delim", possibly prefixed (u8R, LR, uR, UR).
    if (c == 'R' && i + 1 < s.size() && s[i + 1] == '"') {
      size_t p = out->size();
      while (p > 0 && ident_char((*out)[p - 1])) --p;
      const std::string prefix = out->substr(p);
      if (prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L") {
        const size_t open = raw_string_open(s, i + 1);
        if (open != std::string::npos) {
          const std::string close = ")" + std::string(s.substr(i + 2, open - (i + 2))) + "\"";
          const size_t end = s.find(close, open + 1);
          const size_t stop = end == std::string::npos ? s.size() : end + close.size();
          emit('R', false);
          for (size_t k = i + 1; k < stop; ++k) emit(s[k] == '\n' ? ' ' : s[k], true);
          i = stop;
          continue;
        }
      }
    }
    if (c == '"' || c == '\'') {
      emit(c, false);
      size_t k = i + 1;
      for (; k < s.size() && s[k] != c && s[k] != '\n'; ++k) {
        if (s[k] == '\\' && k + 1 < s.size() && s[k + 1] != '\n') emit(s[k++], true);
        emit(s[k], true);
      }
      if (k < s.size() && s[k] == c) emit(s[k++], false);
      i = k;
      continue;
    }
    emit(c, false);
    ++i;
  }
  return s.size();
}

void skip_space(std::string_view line, size_t *p) {
  while (*p < line.size() && is_directive_space(line[*p])) ++*p;
}

// Longer names open no file (ENAMETOOLONG), so the closing character is looked for no further:
// a search to the end of the line made a line of many '<' or "f(<" quadratic.
constexpr size_t kMaxHeaderName = 4096;

// "name" or <name> at *p; false if the operand is anything else.
bool header_name(std::string_view line, size_t *p, bool *angle, std::string *name) {
  if (*p >= line.size() || (line[*p] != '"' && line[*p] != '<')) return false;
  const char close = line[*p] == '"' ? '"' : '>';
  const size_t end = line.substr(0, *p + 2 + kMaxHeaderName).find(close, *p + 1);
  if (end == std::string_view::npos) return false;
  *angle = close == '>';
  *name = std::string(line.substr(*p + 1, end - *p - 1));
  *p = end + 1;
  return true;
}

bool path_like(std::string_view s) {
  if (s.empty()) return false;
  bool letter = false;
  for (char c : s) {
    if (!(ident_char(c) || c == '.' || c == '/' || c == '-' || c == '+')) return false;
    letter |= (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  }
  return letter;
}

// The state of one text's scan: the directives found, and the macros seen to wrap
// __has_include (defined here), so that a wrapper called with a macro operand is noticed.
struct Scan {
  Directives out;
  std::set<std::string, std::less<>> wrappers{"__has_include", "__has_include_next"};

  void computed(std::string_view line) {
    if (out.computed.empty()) out.computed = std::string(line);
  }
  void has_include(DirectiveKind kind, bool angle, std::string name) {
    if (probed.insert(std::string(angle ? "<" : "\"") + name).second)
      out.names.push_back({kind, angle, std::move(name)});
  }
  void macro_call(const std::string &name) {
    if (calls.insert(name).second) out.macro_calls.push_back(name);
  }
  // Never an empty name: scan_define looks for each wrapper in the lines that follow.
  void wrapper(const std::string &name) {
    if (!name.empty() && wrappers.insert(name).second) out.wrappers.push_back(name);
  }
  std::set<std::string> calls;
  std::set<std::string> probed;  // __has_include names already listed
};

// Calls fn(word, at, end) for each identifier of line from `from` on, outside literals, once
// each (a scan of a line is linear).
template <typename Fn>
void for_each_identifier(std::string_view line, const std::vector<bool> &literal, size_t from,
                         Fn &&fn) {
  for (size_t at = from; at < line.size();) {
    if (literal[at] || !ident_char(line[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < line.size() && ident_char(line[end])) ++end;
    if (at == 0 || !ident_char(line[at - 1])) fn(line.substr(at, end - at), at, end);
    at = end;
  }
}

// Past "(" and the spaces around it at *r (after a macro's name); false if no '(' follows.
bool open_call(std::string_view line, size_t *r) {
  skip_space(line, r);
  if (*r >= line.size() || line[*r] != '(') return false;
  ++*r;
  skip_space(line, r);
  return true;
}

// Calls of __has_include or of a macro that wraps it, in an #if/#elif line: a literal operand
// is a probe; any other operand is computed.
void scan_condition(std::string_view line, const std::vector<bool> &literal, Scan *scan) {
  for_each_identifier(line, literal, 0, [&](std::string_view word, size_t, size_t end) {
    size_t r = end;
    if (!open_call(line, &r)) return;
    bool angle = false;
    std::string name;
    const bool literal_operand = header_name(line, &r, &angle, &name);
    if (!scan->wrappers.count(word)) {
      if (!literal_operand && word != "defined") scan->macro_call(std::string(word));
      return;
    }
    if (literal_operand)
      scan->has_include(DirectiveKind::has_include, angle, std::move(name));
    else
      scan->computed(line);
  });
  // Header names handed to a macro defined elsewhere that wraps __has_include (CCCL's
  // _CCCL_HAS_INCLUDE(<x>)): every path-like literal of the condition is probed.
  for (size_t at = 0; at < line.size(); ++at) {
    if (line[at] != '<' && line[at] != '"') continue;
    size_t r = at;
    bool angle = false;
    std::string name;
    if (header_name(line, &r, &angle, &name) && path_like(name)) {
      scan->has_include(DirectiveKind::has_include, angle, std::move(name));
      at = r - 1;
    }
  }
}

// #define NAME(params) body: a body that calls __has_include (or a wrapper defined earlier)
// makes NAME a wrapper; literal operands in the body are probes. Each identifier of the body is
// looked up once (searching the line for every wrapper made a header of many wrappers
// quadratic), and a wrapper this line makes counts from the next line on.
void scan_define(std::string_view line, size_t p, const std::vector<bool> &literal, Scan *scan) {
  size_t q = p;
  while (q < line.size() && ident_char(line[q])) ++q;
  const std::string name(line.substr(p, q - p));
  if (name.empty()) return;  // "#define (x) ...": no macro, an error NVRTC reports
  const bool function_like = q < line.size() && line[q] == '(';
  // Most bodies name no wrapper: looking up each of their identifiers was most of a header's scan.
  if (scan->out.wrappers.empty() && line.find("__has_include", q) == std::string_view::npos) return;
  std::vector<std::pair<std::string_view, size_t>> uses;  // (wrapper, where)
  for_each_identifier(line, literal, q, [&](std::string_view word, size_t at, size_t) {
    if (scan->wrappers.count(word)) uses.emplace_back(word, at);
  });
  std::sort(uses.begin(), uses.end());  // by wrapper, then place: the order probes are listed in
  for (const auto &[wrapper, at] : uses) {
    if (function_like) scan->wrapper(name);
    size_t r = at + wrapper.size();
    if (!open_call(line, &r)) continue;
    bool angle = false;
    std::string header;
    if (header_name(line, &r, &angle, &header))
      scan->has_include(DirectiveKind::has_include, angle, std::move(header));
    else if (!function_like)
      scan->computed(line);  // an object-like macro over a computed operand
  }
}

// Whether a directive's line may go on past its newline: a block comment or a raw string may
// (its R, or a prefix's, before a quote); a line comment, a string or a character literal ends
// where the line does. Their bytes stay in the line the other tests below read, which is then
// more than the parser sees (it drops a line comment, keeps a literal's bytes), never less. A
// loop: string_view::find_first_of with a set calls memchr on the set for each byte of the line.
bool may_go_on(std::string_view line) {
  for (size_t i = 0; i + 1 < line.size(); ++i)
    if ((line[i] == '/' && line[i + 1] == '*') || (line[i] == 'R' && line[i + 1] == '"'))
      return true;
  return false;
}

// Whether the rest of a condition's line (no header name in it) after its directive's name has a
// '(' after an identifier that may be a macro's name: any but `defined`, which no text makes a
// wrapper (else every one counts). The parser reads "#if (" as a call of `if`: so does this.
bool calls_a_macro(std::string_view line, const Scan &scan) {
  for (size_t open = line.find('('); open != std::string_view::npos;
       open = line.find('(', open + 1)) {
    size_t end = open;
    while (end > 0 && is_directive_space(line[end - 1])) --end;
    size_t start = end;
    while (start > 0 && ident_char(line[start - 1])) --start;
    if (start == end && end == 0) return true;  // the directive's name
    if (start == end) continue;                 // "(a || b)": no call
    if (line.substr(start, end - start) != "defined" || !scan.out.wrappers.empty()) return true;
  }
  return false;
}

void parse_directive(std::string_view line, const std::vector<bool> &literal, Scan *scan) {
  size_t p = 0;
  skip_space(line, &p);
  if (p < line.size() && line[p] == '#') {
    ++p;
  } else if (line.substr(p, 2) == "%:") {  // the digraph
    p += 2;
  } else {
    return;
  }
  skip_space(line, &p);
  size_t q = p;
  while (q < line.size() && ident_char(line[q])) ++q;
  const std::string_view word = line.substr(p, q - p);
  p = q;
  skip_space(line, &p);
  if (!is_parsed_directive(word)) return;
  if (word == "include" || word == "include_next" || word == "import" || word == "embed") {
    Directive d;
    d.kind = word == "include_next" ? DirectiveKind::include_next
             : word == "embed"      ? DirectiveKind::embed
                                    : DirectiveKind::include;
    if (header_name(line, &p, &d.angle, &d.name))
      scan->out.names.push_back(std::move(d));
    else
      scan->computed("#" + std::string(word) + " " + std::string(line.substr(p)));
  } else if (is_condition(word)) {
    scan_condition(line, literal, scan);
  } else if (word == "define") {
    scan_define(line, p, literal, scan);
  }
}

}  // namespace

bool is_parsed_directive(std::string_view name) {
  return name == "include" || name == "include_next" || name == "import" || name == "embed" ||
         is_condition(name) || name == "define";
}

struct DirectiveParser::State {
  Scan scan;
  std::string line;
  std::vector<bool> literal;
  // The first __has_include at or after where the last search began; null: none there, or no
  // search yet (searched says which). Reused until a rest begins past it.
  const char *has_include = nullptr;
  bool searched = false;

  bool has_include_in(std::string_view rest) {
    if (!searched || (has_include && has_include < rest.data())) {
      static constexpr std::string_view kName = "__has_include";
      has_include =
          static_cast<const char *>(::memmem(rest.data(), rest.size(), kName.data(), kName.size()));
      searched = true;
    }
    return has_include != nullptr;
  }
};

DirectiveParser::DirectiveParser() : state_(std::make_unique<State>()) {}
DirectiveParser::~DirectiveParser() = default;

size_t DirectiveParser::parse_line(std::string_view spliced, size_t start) {
  const size_t end = clean_line(spliced, start, &state_->line, &state_->literal);
  parse_directive(state_->line, state_->literal, &state_->scan);
  return end;
}

bool DirectiveParser::may_act_on(std::string_view name, std::string_view line,
                                 std::string_view rest) const {
  if (!is_parsed_directive(name)) return false;
  // A #define that names no wrapper acts only when its whole line calls __has_include. The line
  // of one that goes on past its newline (CUPTI's tables of macros, a comment on each entry) ends
  // only where clean_line says; it ends in rest, and what clean_line keeps of it is rest's bytes
  // with comments turned into spaces, so a __has_include in it is one in rest.
  const bool define_of_no_wrapper = name == "define" && state_->scan.out.wrappers.empty();
  if (may_go_on(line)) return !define_of_no_wrapper || state_->has_include_in(rest);
  if (name == "define")
    return !define_of_no_wrapper || line.find("__has_include") != std::string_view::npos;
  if (is_condition(name))
    return line.find('<') != std::string_view::npos || line.find('"') != std::string_view::npos ||
           calls_a_macro(line, state_->scan);
  return true;
}

Directives DirectiveParser::finish() {
  return std::move(state_->scan.out);
}

Directives find_directives_reference(std::string_view text) {
  const std::string s = without_line_splices(without_trigraphs(text));
  DirectiveParser parser;
  for (size_t start = 0; start < s.size();) start = parser.parse_line(s, start) + 1;
  return parser.finish();
}

}  // namespace progcache
