#include "core/text_scan.hpp"

#include <algorithm>
#include <string>

#include "core/lex_rules.hpp"
#include "core/scan_blocks.hpp"

namespace progcache {
namespace {

using lex::ident_char;

// One pass over a text without line splices and trigraphs, acting where the reference lexer
// (core/source_facts.cpp) acts and nowhere else; a directive's mark that starts a line hands
// that line to the directives' parser.
class Scan {
 public:
  Scan(std::string_view s, DirectiveParser *lines, const scan_blocks::Kernels &kernels)
      : s_(s), lines_(lines), kernels_(kernels) {}

  SourceFacts run() {
    for (size_t i = 0; i < s_.size();) {
      base_ = i;
      kernels_.block(s_, base_, &block_);
      for (uint64_t m = block_.events; m != 0;) {
        i = on_event(base_ + size_t(__builtin_ctzll(m)));
        if (i - base_ >= 64) break;
        m &= ~uint64_t(0) << (i - base_);
      }
      if (i < base_ + 64) i = base_ + 64;
    }
    return facts_;
  }

 private:
  // Acts on the byte at p; returns where the scan goes on (past p; may be past the end).
  size_t on_event(size_t p) {
    const size_t n = s_.size();
    switch (s_[p]) {
      case '/':
        if (p + 1 < n && s_[p + 1] == '/') return line_end(p);
        if (p + 1 < n && s_[p + 1] == '*') {
          const size_t end = kernels_.find_pair(s_, p + 2, '*', '/');
          passed_comment(p, end == n ? n : end + 2);
          return end == n ? n : end + 2;
        }
        return p + 1;
      case '"':
        return on_quote(p);
      case '\'':
        return skip_literal(p);
      case '#':
        if (lines_) on_mark(p);
        if (p + 1 < n && s_[p + 1] == '#') {
          facts_.paste = true;
          return p + 2;
        }
        return p + 1;
      case '%':
        if (lines_ && p + 1 < n && s_[p + 1] == ':') on_mark(p);
        if (s_.compare(p, 4, "%:%:") == 0) {
          facts_.paste = true;
          return p + 4;
        }
        return p + 1;
      default:
        break;
    }
    if (s_[p] >= '0' && s_[p] <= '9') return last_number_end_ = lex::number_end(s_, p);
    size_t end = p;
    while (end < n && ident_char(s_[end])) ++end;
    lex::classify(s_.substr(p, end - p), &facts_);
    return end;
  }

  // A quote ends a raw string's encoding prefix (R, u8R...) when the identifier before it is
  // one and is not the tail of a pp-number (1e+R"x" is a number, then a plain literal).
  size_t on_quote(size_t p) {
    size_t start = p;
    while (start > 0 && p - start < 4 && ident_char(s_[start - 1])) --start;
    if (start < p && last_number_end_ != p && lex::raw_prefix(s_.substr(start, p - start))) {
      const size_t after = lex::skip_raw_string(s_, p - 1);
      if (after != p - 1) return after;
    }
    return skip_literal(p);
  }

  // The newline after p (p in the current block), or the text's end.
  size_t line_end(size_t p) const {
    if (const uint64_t m = block_.newline & (~uint64_t(0) << (p - base_)))
      return base_ + size_t(__builtin_ctzll(m));
    return std::min(s_.find('\n', base_ + 64), s_.size());
  }

  // lex::skip_literal for the literal whose quote is at p (in the current block), moving from
  // one quote, newline or backslash to the next: by the block's bits, then by find_any_of.
  size_t skip_literal(size_t p) const {
    const char quote = s_[p];
    const uint64_t stops =
        (quote == '"' ? block_.dquote : block_.squote) | block_.newline | block_.backslash;
    size_t i = p + 1;
    while (i < base_ + 64) {
      const uint64_t m = stops & (~uint64_t(0) << (i - base_));
      if (m == 0) {
        i = base_ + 64;
        break;
      }
      i = base_ + size_t(__builtin_ctzll(m));
      if (s_[i] != '\\') return i + 1;
      i += 2;
    }
    for (; i < s_.size(); i += 2) {
      i = kernels_.find_any_of(s_, i, quote, '\n', '\\');
      if (i >= s_.size() || s_[i] != '\\') return i + 1;
    }
    return s_.size() + 1;
  }

  // A block comment [start, end): it joins the run of comments before it when only spaces
  // part them. Only the last run can stand between a directive's mark and its line's start, and
  // one run is all that is kept: a list of every comment made a header of "/**/ " many times its
  // own size in memory.
  void passed_comment(size_t start, size_t end) {
    size_t gap = run_.end;
    if (gap != std::string_view::npos)
      while (gap < start && is_directive_space(s_[gap])) ++gap;
    if (gap == start)
      run_.end = end;
    else
      run_ = {start, end};
  }

  // '#' or "%:" at p: when only spaces and comments come before it on its line, the line is a
  // directive's, and the parser is given it unless it could change nothing (most of a header's
  // lines: #endif, #pragma, a #define of no wrapper...).
  void on_mark(size_t p) {
    size_t q = p;
    while (q > 0 && is_directive_space(s_[q - 1])) --q;
    if (q == run_.end) {
      q = run_.start;
      while (q > 0 && is_directive_space(s_[q - 1])) --q;
    }
    if (q > 0 && s_[q - 1] != '\n') return;
    if (may_act_on(p)) lines_->parse_line(s_, q);
  }

  // Whether the parser could act on the directive whose mark is at p: false for one it ignores
  // (#endif, #pragma...) and one whose line shows it changes nothing (DirectiveParser::may_act_on);
  // true also when a comment comes before the name, whose end the parser finds.
  bool may_act_on(size_t p) const {
    size_t at = p + (s_[p] == '#' ? 1 : 2);
    while (at < s_.size() && is_directive_space(s_[at])) ++at;
    if (at < s_.size() && s_[at] == '/') return true;
    size_t end = at;
    while (end < s_.size() && ident_char(s_[end])) ++end;
    const size_t nl = std::min(s_.find('\n', end), s_.size());
    return lines_->may_act_on(s_.substr(at, end - at), s_.substr(end, nl - end), s_.substr(end));
  }

  struct CommentRun {
    size_t start, end;  // npos: none yet
  };
  std::string_view s_;
  DirectiveParser *lines_;
  const scan_blocks::Kernels &kernels_;
  SourceFacts facts_;
  CommentRun run_{std::string_view::npos, std::string_view::npos};
  size_t base_ = 0;  // where the current block starts
  scan_blocks::Block block_;
  size_t last_number_end_ = std::string_view::npos;
};

TextFacts reference(std::string_view text, bool with_directives) {
  TextFacts f;
  if (with_directives) f.directives = find_directives_reference(text);
  f.lexical = lexical_facts_reference(text);
  return f;
}

}  // namespace

TextFacts scan_text(std::string_view text, bool with_directives) {
  const scan_blocks::Kernels &kernels = scan_blocks::kernels();
  const scan_blocks::TextShape shape = kernels.shape_of(text);
  if (shape.trigraph_pair) return reference(text, with_directives);
  std::string unspliced;
  std::string_view s = text;
  if (shape.line_splice) {
    bool backslash_newline = false;
    unspliced = without_line_splices(text, &backslash_newline);
    if (backslash_newline) return reference(text, with_directives);
    s = unspliced;
  }
  TextFacts f;
  if (!with_directives) {  // the options' texts: no parser to allocate
    f.lexical = Scan(s, nullptr, kernels).run();
    return f;
  }
  DirectiveParser lines;
  f.lexical = Scan(s, &lines, kernels).run();
  f.directives = lines.finish();
  return f;
}

Directives find_directives(std::string_view text) {
  return scan_text(text, true).directives;
}

SourceFacts lexical_facts(std::string_view text) {
  return scan_text(text, false).lexical;
}

}  // namespace progcache
