// The include scanner's and the lexical facts' reading of a text in one pass that stops only at
// the bytes that can matter (core/scan_blocks.hpp): a comment's or literal's start, a directive's
// mark, a number, an identifier that may name a time or path macro. Everything between is passed
// over 64 bytes at a time, so a source's scan costs a small part of its hash (issue #34). It gives
// exactly what the reference lexers give (find_directives_reference, lexical_facts_reference),
// and falls back on them for the texts it does not read itself: those with a trigraph's "??", and
// those where removing the line splices leaves a backslash before a newline (a literal the two
// reference lexers end differently).
#pragma once

#include <string_view>

#include "core/directives.hpp"
#include "core/source_facts.hpp"

namespace progcache {

struct TextFacts {
  Directives directives;
  SourceFacts lexical;
  bool operator==(const TextFacts &) const = default;
};

// The directives (when with_directives) and the lexical facts of text. Thread-safe.
TextFacts scan_text(std::string_view text, bool with_directives);

}  // namespace progcache
