#include "core/scan_blocks.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

#include "core/cpu_features.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace progcache::scan_blocks {
namespace {

// A byte's classes are the AND of one table indexed by its low nibble and one by its high
// nibble, so every class is a rectangle of (high, low) nibbles: what lets PSHUFB classify 32
// bytes with two lookups. Bytes of 0x80 and above are in none.
constexpr uint8_t kStruct = 1;  // 0x22 " 0x23 # 0x25 % 0x27 ' 0x2F /
constexpr uint8_t kDigit = 2;   // 0x30-0x39
constexpr uint8_t kAlphaA = 4;  // 0x41-0x4F, 0x61-0x6F
constexpr uint8_t kAlphaB = 8;  // 0x50-0x5A, 0x70-0x7A
constexpr uint8_t kUnder = 16;  // 0x5F _
constexpr uint8_t kAdeim = 32;  // A D E I M
constexpr uint8_t kDt = 128;    // D T
constexpr uint8_t kIdent = kDigit | kAlphaA | kAlphaB | kUnder;
constexpr uint8_t kPiece = kUnder | kAdeim | kDt;  // _ D A T E I M
constexpr uint8_t kAfterUnder = kUnder | kDt;      // what makes '_' a candidate

struct Tables {
  uint8_t lo[16] = {}, hi[16] = {}, cls[256] = {};
  uint8_t lo64[64] = {}, hi64[64] = {};  // lo and hi four times: a ZMM register's four lanes
  constexpr void add(uint8_t bit, std::initializer_list<int> his, std::initializer_list<int> los) {
    for (int h : his) hi[h] |= bit;
    for (int l : los) lo[l] |= bit;
  }
  constexpr Tables() {
    add(kStruct, {2}, {0x2, 0x3, 0x5, 0x7, 0xF});
    add(kDigit, {3}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    add(kAlphaA, {4, 6}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 0xA, 0xB, 0xC, 0xD, 0xE, 0xF});
    add(kAlphaB, {5, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xA});
    add(kUnder, {5}, {0xF});
    add(kAdeim, {4}, {0x1, 0x4, 0x5, 0x9, 0xD});
    add(kDt, {4, 5}, {0x4});
    for (int c = 0; c < 256; ++c) cls[c] = c < 0x80 ? uint8_t(lo[c & 15] & hi[c >> 4]) : 0;
    for (int k = 0; k < 64; ++k) {
      lo64[k] = lo[k & 15];
      hi64[k] = hi[k & 15];
    }
  }
};
constexpr Tables kTables;

uint8_t class_of(char c) {
  return kTables.cls[static_cast<unsigned char>(c)];
}

// The classes of 64 bytes, one mask each.
struct BlockBits {
  uint64_t structural = 0, digit = 0, ident = 0, piece = 0, under = 0, after_under = 0;
  uint64_t newline = 0, dquote = 0, squote = 0, backslash = 0;  // the bytes themselves
};

// The block from its bytes' classes and those of the bytes either side (0 past the ends), written
// into the caller's; inlined into each kernel, whatever its target.
inline __attribute__((always_inline)) void combine(const BlockBits &b, uint8_t before,
                                                   uint8_t after, Block *out) {
  const uint64_t starts = ~((b.ident << 1) | uint64_t((before & kIdent) != 0));
  const uint64_t piece_next = (b.piece >> 1) | (uint64_t((after & kPiece) != 0) << 63);
  const uint64_t after_under_next =
      (b.after_under >> 1) | (uint64_t((after & kAfterUnder) != 0) << 63);
  out->events = b.structural | (b.digit & starts) | (b.piece & ~b.under & starts & piece_next) |
                (b.under & starts & after_under_next);
  out->newline = b.newline;
  out->dquote = b.dquote;
  out->squote = b.squote;
  out->backslash = b.backslash;
}

uint8_t class_before(std::string_view text, size_t at) {
  return at > 0 ? class_of(text[at - 1]) : 0;
}
uint8_t class_after(std::string_view text, size_t at) {
  return text.size() - at > 64 ? class_of(text[at + 64]) : 0;
}

// The 64 bytes at `at`, the bytes past the end NUL (which is in no class).
inline __attribute__((always_inline)) const char *padded(std::string_view text, size_t at,
                                                         char (&tail)[64]) {
  if (text.size() - at >= 64) return text.data() + at;
  std::memset(tail, 0, sizeof tail);
  std::memcpy(tail, text.data() + at, text.size() - at);
  return tail;
}

size_t find_any_portable(std::string_view t, size_t i, char a, char b, char c) {
  for (; i < t.size(); ++i)
    if (t[i] == a || t[i] == b || t[i] == c) return i;
  return t.size();
}

// The first a from i on (memchr: vectorised by the C library on every CPU), else t.size().
size_t find_byte(std::string_view t, size_t i, char a) {
  if (i >= t.size()) return t.size();
  const void *at = std::memchr(t.data() + i, a, t.size() - i);
  return at ? size_t(static_cast<const char *>(at) - t.data()) : t.size();
}

size_t find_pair_portable(std::string_view t, size_t i, char a, char b) {
  for (i = find_byte(t, i, a); i + 1 < t.size(); i = find_byte(t, i + 1, a))
    if (t[i + 1] == b) return i;
  return t.size();
}

TextShape shape_portable(std::string_view t, size_t from, TextShape shape) {
  shape.trigraph_pair |= find_pair_portable(t, from, '?', '?') != t.size();
  for (size_t i = find_byte(t, from, '\\'); i + 1 < t.size() && !shape.line_splice;
       i = find_byte(t, i + 1, '\\'))
    shape.line_splice = t[i + 1] == '\n' || t[i + 1] == '\r';
  return shape;
}

std::atomic<Level> g_limit{Level::avx512};

#if defined(__x86_64__)

Level detect_level() {
  switch (progcache_glibc_vector_level()) {
    case 2:
      return Level::avx512;
    case 1:
      return Level::avx2;
    case 0:
      return Level::portable;
    default:
      return cpuid_level();
  }
}

#define PCACHE_AVX2 __attribute__((target("avx2")))
#define PCACHE_AVX512 __attribute__((target("avx2,avx512f,avx512bw")))

PCACHE_AVX2 uint32_t mask_of(__m256i cls, uint8_t bits) {
  const __m256i none = _mm256_cmpeq_epi8(_mm256_and_si256(cls, _mm256_set1_epi8(char(bits))),
                                         _mm256_setzero_si256());
  return ~uint32_t(_mm256_movemask_epi8(none));
}

PCACHE_AVX2 BlockBits bits_avx2(const char *p) {
  const __m256i lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kTables.lo));
  const __m256i hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kTables.hi));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  BlockBits b;
  for (int half = 0; half < 2; ++half) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(p + 32 * half));
    const __m256i cls = _mm256_and_si256(
        _mm256_shuffle_epi8(lo, _mm256_and_si256(v, nibble)),
        _mm256_shuffle_epi8(hi, _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble)));
    const int shift = 32 * half;
    b.structural |= uint64_t(mask_of(cls, kStruct)) << shift;
    b.digit |= uint64_t(mask_of(cls, kDigit)) << shift;
    b.ident |= uint64_t(mask_of(cls, kIdent)) << shift;
    b.piece |= uint64_t(mask_of(cls, kPiece)) << shift;
    b.under |= uint64_t(mask_of(cls, kUnder)) << shift;
    b.after_under |= uint64_t(mask_of(cls, kAfterUnder)) << shift;
    auto bytes = [&](char c) PCACHE_AVX2 {
      return uint64_t(uint32_t(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(c)))))
             << shift;
    };
    b.newline |= bytes('\n');
    b.dquote |= bytes('"');
    b.squote |= bytes('\'');
    b.backslash |= bytes('\\');
  }
  return b;
}

// A masked load reads no byte past the end (nor faults there): the tail needs no copy.
PCACHE_AVX512 void block_avx512(std::string_view text, size_t at, Block *out) {
  const size_t left = text.size() - at;
  const __mmask64 in = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
  const __m512i v = _mm512_maskz_loadu_epi8(in, text.data() + at);
  const __m512i lo = _mm512_loadu_si512(kTables.lo64);
  const __m512i hi = _mm512_loadu_si512(kTables.hi64);
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i cls =
      _mm512_and_si512(_mm512_shuffle_epi8(lo, _mm512_and_si512(v, nibble)),
                       _mm512_shuffle_epi8(hi, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble)));
  auto mask = [&](uint8_t bits) PCACHE_AVX512 {
    return uint64_t(_mm512_test_epi8_mask(cls, _mm512_set1_epi8(char(bits))));
  };
  auto bytes = [&](char c) PCACHE_AVX512 {
    return uint64_t(_mm512_mask_cmpeq_epi8_mask(in, v, _mm512_set1_epi8(c)));
  };
  BlockBits b;
  b.structural = mask(kStruct);
  b.digit = mask(kDigit);
  b.ident = mask(kIdent);
  b.piece = mask(kPiece);
  b.under = mask(kUnder);
  b.after_under = mask(kAfterUnder);
  b.newline = bytes('\n');
  b.dquote = bytes('"');
  b.squote = bytes('\'');
  b.backslash = bytes('\\');
  combine(b, class_before(text, at), class_after(text, at), out);
}

PCACHE_AVX2 void block_avx2(std::string_view text, size_t at, Block *out) {
  char tail[64];
  combine(bits_avx2(padded(text, at, tail)), class_before(text, at), class_after(text, at), out);
}

PCACHE_AVX2 TextShape shape_avx2(std::string_view t) {
  __m256i pairs = _mm256_setzero_si256(), splices = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 33 <= t.size(); i += 32) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(t.data() + i));
    const __m256i w = _mm256_loadu_si256((const __m256i *)(t.data() + i + 1));
    pairs = _mm256_or_si256(pairs, _mm256_and_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('?')),
                                                    _mm256_cmpeq_epi8(w, _mm256_set1_epi8('?'))));
    const __m256i newline = _mm256_or_si256(_mm256_cmpeq_epi8(w, _mm256_set1_epi8('\n')),
                                            _mm256_cmpeq_epi8(w, _mm256_set1_epi8('\r')));
    splices = _mm256_or_si256(
        splices, _mm256_and_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\\')), newline));
  }
  TextShape shape;
  shape.trigraph_pair = !_mm256_testz_si256(pairs, pairs);
  shape.line_splice = !_mm256_testz_si256(splices, splices);
  return shape_portable(t, i, shape);
}

PCACHE_AVX512 TextShape shape_avx512(std::string_view t) {
  uint64_t pairs = 0, splices = 0;
  size_t i = 0;
  for (; i + 65 <= t.size(); i += 64) {
    const __m512i v = _mm512_loadu_si512(t.data() + i);
    const __m512i w = _mm512_loadu_si512(t.data() + i + 1);
    pairs |= _mm512_mask_cmpeq_epi8_mask(_mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('?')), w,
                                         _mm512_set1_epi8('?'));
    const __mmask64 backslash = _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8('\\'));
    splices |= _mm512_mask_cmpeq_epi8_mask(backslash, w, _mm512_set1_epi8('\n')) |
               _mm512_mask_cmpeq_epi8_mask(backslash, w, _mm512_set1_epi8('\r'));
  }
  TextShape shape;
  shape.trigraph_pair = pairs != 0;
  shape.line_splice = splices != 0;
  return shape_portable(t, i, shape);
}

PCACHE_AVX2 size_t find_any_avx2(std::string_view t, size_t i, char a, char b, char c) {
  const __m256i va = _mm256_set1_epi8(a), vb = _mm256_set1_epi8(b), vc = _mm256_set1_epi8(c);
  for (; i + 32 <= t.size(); i += 32) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(t.data() + i));
    const __m256i hit =
        _mm256_or_si256(_mm256_or_si256(_mm256_cmpeq_epi8(v, va), _mm256_cmpeq_epi8(v, vb)),
                        _mm256_cmpeq_epi8(v, vc));
    if (const uint32_t m = uint32_t(_mm256_movemask_epi8(hit))) return i + size_t(__builtin_ctz(m));
  }
  return find_any_portable(t, i, a, b, c);
}

// A masked load reads no byte past the end (nor faults there), so the tail needs no second loop.
PCACHE_AVX512 size_t find_any_avx512(std::string_view t, size_t i, char a, char b, char c) {
  const __m512i va = _mm512_set1_epi8(a), vb = _mm512_set1_epi8(b), vc = _mm512_set1_epi8(c);
  for (; i < t.size(); i += 64) {
    const size_t left = t.size() - i;
    const __mmask64 in = left >= 64 ? ~__mmask64(0) : (__mmask64(1) << left) - 1;
    const __m512i v = _mm512_maskz_loadu_epi8(in, t.data() + i);
    const uint64_t m = (_mm512_cmpeq_epi8_mask(v, va) | _mm512_cmpeq_epi8_mask(v, vb) |
                        _mm512_cmpeq_epi8_mask(v, vc)) &
                       in;
    if (m) return i + size_t(__builtin_ctzll(m));
  }
  return t.size();
}

PCACHE_AVX2 size_t find_pair_avx2(std::string_view t, size_t i, char a, char b) {
  const __m256i va = _mm256_set1_epi8(a), vb = _mm256_set1_epi8(b);
  for (; i + 33 <= t.size(); i += 32) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(t.data() + i));
    const __m256i w = _mm256_loadu_si256((const __m256i *)(t.data() + i + 1));
    const __m256i hit = _mm256_and_si256(_mm256_cmpeq_epi8(v, va), _mm256_cmpeq_epi8(w, vb));
    if (const uint32_t m = uint32_t(_mm256_movemask_epi8(hit))) return i + size_t(__builtin_ctz(m));
  }
  return find_pair_portable(t, i, a, b);
}

PCACHE_AVX512 size_t find_pair_avx512(std::string_view t, size_t i, char a, char b) {
  const __m512i va = _mm512_set1_epi8(a), vb = _mm512_set1_epi8(b);
  for (; i + 65 <= t.size(); i += 64) {
    const __m512i v = _mm512_loadu_si512(t.data() + i);
    const __m512i w = _mm512_loadu_si512(t.data() + i + 1);
    if (const uint64_t m = _mm512_mask_cmpeq_epi8_mask(_mm512_cmpeq_epi8_mask(v, va), w, vb))
      return i + size_t(__builtin_ctzll(m));
  }
  return find_pair_avx2(t, i, a, b);
}

#endif

TextShape shape_of_portable(std::string_view t) {
  return shape_portable(t, 0, TextShape{});
}

// One byte at a time, the bytes no mask holds (most letters, spaces) passed over by one lookup.
void block_portable(std::string_view text, size_t at, Block *block) {
  enum : uint8_t { kEvent = 1, kNumber = 2, kLetter = 4, kLow = 8, kNl = 16, kDq = 32, kSq = 64 };
  static constexpr auto kWatch = [] {
    std::array<uint8_t, 256> w{};
    for (unsigned char c : std::string_view("/\"'#%")) w[c] |= kEvent;
    for (unsigned char c = '0'; c <= '9'; ++c) w[c] |= kNumber;
    for (unsigned char c : std::string_view("ADEIMT")) w[c] |= kLetter;
    w['_'] |= kLow;
    w['\n'] |= kNl;
    w['"'] |= kDq;
    w['\''] |= kSq;
    w['\\'] |= 128;
    return w;
  }();
  Block out;  // built in registers, stored once
  const size_t end = std::min(text.size(), at + 64);
  for (size_t i = at; i < end; ++i) {
    const uint8_t w = kWatch[static_cast<unsigned char>(text[i])];
    if (w == 0) continue;
    const uint64_t bit = uint64_t(1) << (i - at);
    if (w & kNl) out.newline |= bit;
    if (w & kDq) out.dquote |= bit;
    if (w & kSq) out.squote |= bit;
    if (w & 128) out.backslash |= bit;
    if (w & kEvent) out.events |= bit;
    if (!(w & (kNumber | kLetter | kLow)) || (i > 0 && (class_of(text[i - 1]) & kIdent))) continue;
    const uint8_t next = i + 1 < text.size() ? class_of(text[i + 1]) : 0;
    if ((w & kNumber) || ((w & kLetter) && (next & kPiece)) || ((w & kLow) && (next & kAfterUnder)))
      out.events |= bit;
  }
  *block = out;
}

constexpr Kernels kPortable{shape_of_portable, block_portable, find_any_portable,
                            find_pair_portable};
#if defined(__x86_64__)
// Texts shorter than one vector are shaped by the portable loop.
PCACHE_AVX2 TextShape shape_of_avx2(std::string_view t) {
  return t.size() >= 64 ? shape_avx2(t) : shape_of_portable(t);
}
PCACHE_AVX512 TextShape shape_of_avx512(std::string_view t) {
  return t.size() >= 65 ? shape_avx512(t) : shape_of_portable(t);
}
constexpr Kernels kAvx2{shape_of_avx2, block_avx2, find_any_avx2, find_pair_avx2};
constexpr Kernels kAvx512{shape_of_avx512, block_avx512, find_any_avx512, find_pair_avx512};
#endif

}  // namespace

Level cpu_level() {
#if defined(__x86_64__)
  static const Level level = detect_level();
  return level;
#else
  return Level::portable;
#endif
}

Level cpuid_level() {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX))
    return Level::portable;
  unsigned xcr0 = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0 & 6) != 6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2))
    return Level::portable;  // the OS does not save the YMM registers, or no AVX2
  // AVX-512 BW, its registers saved (opmask, ZMM_Hi256, Hi16_ZMM).
  if ((xcr0 & 0xE0) == 0xE0 && (b & bit_AVX512F) && (b & bit_AVX512BW)) return Level::avx512;
  return Level::avx2;
#else
  return Level::portable;
#endif
}

void limit_level(Level level) {
  g_limit.store(level);
}

const Kernels &kernels() {
#if defined(__x86_64__)
  switch (std::min(cpu_level(), g_limit.load(std::memory_order_relaxed))) {
    case Level::avx512:
      return kAvx512;
    case Level::avx2:
      return kAvx2;
    case Level::portable:
      break;
  }
#endif
  return kPortable;
}

}  // namespace progcache::scan_blocks
