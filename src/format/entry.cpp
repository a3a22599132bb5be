#include "format/entry.hpp"

#include <openssl/core_names.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "util/endian.hpp"
#include "util/error.hpp"
#include "util/fork_guard.hpp"
#include "util/libcrypto.hpp"
#include "util/openssl_init.hpp"
#include "util/system_library.hpp"
#include "util/thread_state.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

constexpr char kMagic[4] = {'P', 'C', 'E', 'N'};
constexpr uint16_t kFlagMac = 1;
constexpr uint16_t kFlagZstd = 2;
constexpr size_t kMinCompressSize = 64;

// The checksum's seed: XXH3-64 of the header's first 32 bytes, prepared before the body is
// written (util/xxhash.hpp: Xxh3Seed).
Xxh3Seed checksum_seed(const uint8_t *record, size_t body_size) {
  return Xxh3Seed(xxh3_64(record, 32), body_size);
}

void checksum(const uint8_t *record, size_t body_size, const Xxh3Seed &seed, uint8_t out[16]) {
  const std::array<uint8_t, 16> h = xxh3_128(record + kEntryHeaderSize, body_size, seed);
  std::memcpy(out, h.data(), h.size());
}

void checksum(const uint8_t *record, size_t body_size, uint8_t out[16]) {
  checksum(record, body_size, checksum_seed(record, body_size), out);
}

}  // namespace

MacKey::MacKey(ByteView secret) {
  init_openssl();
  unsigned int n = 0;
  const LibCrypto &crypto = libcrypto();
  EVP_MD *md = crypto.EVP_MD_fetch(nullptr, "BLAKE2B-512", nullptr);
  if (!md) md = crypto.EVP_MD_fetch(nullptr, "SHA512", nullptr);  // FIPS providers: no BLAKE2b
  const bool ok = md && crypto.EVP_Digest(secret.data, secret.size, key_, &n, md, nullptr) == 1;
  crypto.EVP_MD_free(md);
  if (!ok || n != sizeof key_) throw Error(Status::internal, "cannot derive the MAC key");
}

void MacKey::sign(const uint8_t *record, size_t body_size, uint8_t out[16]) const {
  // BLAKE2BMAC with a 16-byte output; HMAC-SHA256 truncated to 16 under FIPS providers.
  init_openssl();
  const LibCrypto &crypto = libcrypto();
  static constinit EVP_MAC *blake = nullptr, *hmac = nullptr;
  static constinit ForkSafeOnce fetched;  // not a static's guard: util/fork_guard.hpp
  fetched.run([&] {
    blake = crypto.EVP_MAC_fetch(nullptr, "BLAKE2BMAC", nullptr);
    if (!blake) hmac = crypto.EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  });
  EVP_MAC_CTX *ctx = crypto.EVP_MAC_CTX_new(blake ? blake : hmac);
  if (!ctx) throw Error(Status::internal, "OpenSSL has neither BLAKE2BMAC nor HMAC");
  size_t out_size = 16;
  char digest[] = "SHA256";
  OSSL_PARAM params[2];
  if (blake)
    params[0] = crypto.OSSL_PARAM_construct_size_t("size", &out_size);
  else
    params[0] = crypto.OSSL_PARAM_construct_utf8_string("digest", digest, 0);
  params[1] = crypto.OSSL_PARAM_construct_end();
  uint8_t full[64];
  size_t n = 0;
  const bool ok = crypto.EVP_MAC_init(ctx, key_, sizeof key_, params) == 1 &&
                  crypto.EVP_MAC_update(ctx, record, 32) == 1 &&
                  crypto.EVP_MAC_update(ctx, record + kEntryHeaderSize, body_size) == 1 &&
                  crypto.EVP_MAC_final(ctx, full, &n, sizeof full) == 1 && n >= 16;
  crypto.EVP_MAC_CTX_free(ctx);
  if (!ok) throw Error(Status::internal, "OpenSSL MAC computation failed");
  std::memcpy(out, full, 16);
}

namespace {

// Zero padding after the metadata puts the payload on a 16-byte boundary of the record (and so
// of every buffer holding it): drivers parse cubins as ELF structures in place.
uint64_t padding_after(uint64_t key_size, uint64_t meta_size) {
  return (16 - (kEntryHeaderSize + key_size + meta_size) % 16) % 16;
}

size_t padding_for(ByteView key, ByteView meta) {
  return size_t(padding_after(key.size, meta.size));
}

// Writes the header (without checksum and MAC) and key|meta|padding; returns where the stored
// payload goes.
uint8_t *write_prefix(uint8_t *p, ByteView key, ByteView meta, size_t pad, uint64_t payload_size,
                      uint16_t flags) {
  std::memset(p, 0, kEntryHeaderSize);
  std::memcpy(p, kMagic, 4);
  store_le(p + 4, kEntryFormatVersion, 2);
  store_le(p + 6, flags, 2);
  store_le(p + 8, key.size, 4);
  store_le(p + 12, meta.size, 4);
  store_le(p + 16, payload_size, 8);
  store_le(p + 24, pad, 4);
  uint8_t *q = p + kEntryHeaderSize;
  if (key.size) std::memcpy(q, key.data, key.size);
  if (meta.size) std::memcpy(q + key.size, meta.data, meta.size);
  std::memset(q + key.size + meta.size, 0, pad);
  return q + key.size + meta.size + pad;
}

// Fills in the checksum (from seed: checksum_seed of b's header, taken before its body was
// written) and the MAC.
void seal(Blob &b, const MacKey *mac, const Xxh3Seed &seed) {
  const size_t body = b.size() - kEntryHeaderSize;
  checksum(b.data(), body, seed, b.data() + 32);
  if (mac) mac->sign(b.data(), body, b.data() + 48);
}

// libzstd, opened when an entry is compressed or a compressed one read (util/system_library).
// The members are named as the functions they hold.
// clang-format off
#define PCACHE_ZSTD_FUNCTIONS(X) \
  X(ZSTD_createCCtx) \
  X(ZSTD_createDCtx) \
  X(ZSTD_freeCCtx) \
  X(ZSTD_freeDCtx) \
  X(ZSTD_maxCLevel) \
  X(ZSTD_compressBound) \
  X(ZSTD_compressCCtx) \
  X(ZSTD_isError) \
  X(ZSTD_getErrorName) \
  X(ZSTD_getFrameContentSize) \
  X(ZSTD_findFrameCompressedSize) \
  X(ZSTD_decompressDCtx)
// clang-format on
PCACHE_SYSTEM_LIBRARY_API(ZstdApi, zstd_api, PCACHE_ZSTD_SONAME, Binding::process_scope,
                          PCACHE_ZSTD_FUNCTIONS)

// One compression and one decompression context per thread: creating them costs more than
// compressing a small cubin.
struct ZstdContexts {
  ZSTD_CCtx *c = nullptr;  // made by zstd(), where zstd_api() is loaded
  ZSTD_DCtx *d = nullptr;
  ~ZstdContexts() {
    if (c) zstd_api().ZSTD_freeCCtx(c);
    if (d) zstd_api().ZSTD_freeDCtx(d);
  }
};
ZstdContexts &zstd() {
  const ZstdApi &api = zstd_api();
  ZstdContexts &contexts = ThreadState<ZstdContexts>::get();
  if (!contexts.c) contexts.c = api.ZSTD_createCCtx();
  if (!contexts.d) contexts.d = api.ZSTD_createDCtx();
  if (!contexts.c || !contexts.d) throw std::bad_alloc();
  return contexts;
}

}  // namespace

int max_compress_level() {
  return zstd_api().ZSTD_maxCLevel();
}

Blob encode_entry(ByteView key, ByteView meta, ByteView payload, const MacKey *mac,
                  int compress_level) {
  const size_t pad = padding_for(key, meta);
  const size_t prefix = kEntryHeaderSize + key.size + meta.size + pad;
  // A record must fit in memory with its header: a size near SIZE_MAX would wrap the sum.
  if (payload.size > SIZE_MAX / 2 - prefix || key.size > UINT32_MAX || meta.size > UINT32_MAX)
    throw Error(Status::too_large,
                "value of " + std::to_string(payload.size) + " bytes is too large to store");
  const uint16_t mac_flag = mac ? kFlagMac : 0;
  if (compress_level > 0 && payload.size >= kMinCompressSize) {
    const ZstdApi &z = zstd_api();
    const size_t bound = z.ZSTD_compressBound(payload.size);
    Blob b(prefix + bound);
    uint8_t *out = write_prefix(b.data(), key, meta, pad, payload.size, mac_flag | kFlagZstd);
    const Xxh3Seed seed = checksum_seed(b.data(), b.size() - kEntryHeaderSize);  // see Xxh3Seed
    const size_t n = z.ZSTD_compressCCtx(zstd().c, out, bound, payload.data, payload.size,
                                         std::min(compress_level, z.ZSTD_maxCLevel()));
    if (!z.ZSTD_isError(n) && n < payload.size) {
      b.shrink(prefix + n);
      seal(b, mac, seed);
      return b;
    }
  }
  Blob b(prefix + payload.size);
  uint8_t *out = write_prefix(b.data(), key, meta, pad, payload.size, mac_flag);
  const Xxh3Seed seed = checksum_seed(b.data(), b.size() - kEntryHeaderSize);  // see Xxh3Seed
  if (payload.size) std::memcpy(out, payload.data, payload.size);
  seal(b, mac, seed);
  return b;
}

std::optional<Blob> inflate_entry(const EntryParts &parts, std::string *why) {
  auto fail = [&](const std::string &reason) -> std::optional<Blob> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (!parts.compressed) return fail("entry is not compressed");
  const ByteView frame = parts.payload;
  const ZstdApi &z = zstd_api();
  const unsigned long long declared = z.ZSTD_getFrameContentSize(frame.data, frame.size);
  if (declared != parts.payload_size)
    return fail("compressed payload does not declare the entry's payload size");
  if (z.ZSTD_findFrameCompressedSize(frame.data, frame.size) != frame.size)
    return fail("compressed payload is not exactly one zstd frame");
  const size_t pad = padding_for(parts.key, parts.meta);
  Blob b(kEntryHeaderSize + parts.key.size + parts.meta.size + pad + parts.payload_size);
  uint8_t *out = write_prefix(b.data(), parts.key, parts.meta, pad, parts.payload_size, 0);
  const Xxh3Seed seed = checksum_seed(b.data(), b.size() - kEntryHeaderSize);  // see Xxh3Seed
  const size_t n = z.ZSTD_decompressDCtx(zstd().d, out, parts.payload_size, frame.data, frame.size);
  if (z.ZSTD_isError(n)) return fail(std::string("zstd: ") + z.ZSTD_getErrorName(n));
  if (n != parts.payload_size) return fail("compressed payload decompressed to the wrong size");
  seal(b, nullptr, seed);
  return b;
}

std::optional<uint64_t> entry_payload_size(ByteView header) {
  if (header.size < kEntryHeaderSize || std::memcmp(header.data, kMagic, 4) != 0) return {};
  return load_le(header.data + 16, 8);
}

std::optional<uint64_t> entry_payload_size_checked(ByteView head, uint64_t record_size) {
  if (head.size < kEntryHeaderSize || std::memcmp(head.data, kMagic, 4) != 0 ||
      load_le(head.data + 4, 2) != kEntryFormatVersion)
    return std::nullopt;
  const uint64_t flags = load_le(head.data + 6, 2);
  const uint64_t key_size = load_le(head.data + 8, 4), meta_size = load_le(head.data + 12, 4);
  const uint64_t payload_size = load_le(head.data + 16, 8), pad = load_le(head.data + 24, 4);
  if ((flags & ~uint64_t(kFlagMac | kFlagZstd)) || pad != padding_after(key_size, meta_size))
    return std::nullopt;
  const uint64_t prefix = kEntryHeaderSize + key_size + meta_size + pad;
  if (prefix > record_size) return std::nullopt;
  if (!(flags & kFlagZstd)) {  // the layout fixes the size exactly
    if (record_size - prefix != payload_size) return std::nullopt;
    return payload_size;
  }
  // Compressed: the zstd frame's header, which head holds when it reaches that far, must declare
  // the same content size.
  if (head.size <= prefix) return std::nullopt;
  const unsigned long long declared =
      zstd_api().ZSTD_getFrameContentSize(head.data + prefix, head.size - prefix);
  if (declared != payload_size) return std::nullopt;
  // No frame of that content is larger than its bound: a longer record is damage.
  if (record_size - prefix > zstd_api().ZSTD_compressBound(payload_size)) return std::nullopt;
  return payload_size;
}

std::optional<size_t> entry_key_size(ByteView head) {
  if (head.size < kEntryHeaderSize || std::memcmp(head.data, kMagic, 4) != 0) return std::nullopt;
  const uint64_t key_size = load_le(head.data + 8, 4);
  if (key_size > kMaxEntryKeySize) return std::nullopt;
  return size_t(key_size);
}

std::optional<ByteView> entry_key_in(ByteView head) {
  if (head.size < kEntryHeaderSize || std::memcmp(head.data, kMagic, 4) != 0) return std::nullopt;
  const uint64_t key_size = load_le(head.data + 8, 4);
  if (key_size > head.size - kEntryHeaderSize) return std::nullopt;
  return ByteView(head.data + kEntryHeaderSize, size_t(key_size));
}

namespace {

// The n (at most 8) bytes of a little-endian word that lie last in memory.
uint64_t last_bytes_mask(uint64_t n) {
  return n == 0 ? 0 : ~uint64_t(0) << (64 - 8 * n);
}

// Whether the pad (under 16) bytes before payload are zero: the two words that end at payload,
// masked, since the header lies in front. Neither a loop (a fifth of a memory hit's parse went to
// one) nor a copy into a buffer (its short stores stalled the loads that read it back).
bool padding_is_zero(const uint8_t *payload, uint64_t pad) {
  static_assert(kEntryHeaderSize >= 16, "the header lies in the 16 bytes before any payload");
  const uint64_t low = load_le(payload - 16, 8) & last_bytes_mask(pad > 8 ? pad - 8 : 0);
  const uint64_t high = load_le(payload - 8, 8) & last_bytes_mask(pad < 8 ? pad : 8);
  return (low | high) == 0;
}

}  // namespace

std::optional<EntryParts> parse_entry(ByteView record, std::string *why) {
  auto fail = [&](const char *reason) -> std::optional<EntryParts> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (record.size < kEntryHeaderSize) return fail("entry shorter than its header");
  const uint8_t *p = record.data;
  if (std::memcmp(p, kMagic, 4) != 0) return fail("bad entry magic");
  if (load_le(p + 4, 2) != kEntryFormatVersion) return fail("unknown entry format version");
  const uint64_t flags = load_le(p + 6, 2);
  if (flags & ~uint64_t(kFlagMac | kFlagZstd)) return fail("unknown entry flags");
  if (!(flags & kFlagMac) && (load_le(p + 48, 8) | load_le(p + 56, 8)) != 0)
    return fail("reserved entry header bytes are not zero");
  const uint64_t key_size = load_le(p + 8, 4);
  const uint64_t meta_size = load_le(p + 12, 4);
  const uint64_t payload_size = load_le(p + 16, 8);
  const uint64_t pad = load_le(p + 24, 4);
  // Only encode_entry's layout: the payload on the next 16-byte boundary, behind zero bytes (a
  // record that parses re-encodes to itself; entry_payload_size_checked holds readers to it too).
  if (pad != padding_after(key_size, meta_size) || load_le(p + 28, 4) != 0)
    return fail("bad entry padding field");
  const uint64_t body = record.size - kEntryHeaderSize;
  const bool compressed = flags & kFlagZstd;
  if (key_size > body || meta_size > body - key_size || pad > body - key_size - meta_size)
    return fail("entry sizes do not match its length (truncated or padded)");
  if (!padding_is_zero(p + kEntryHeaderSize + key_size + meta_size + pad, pad))
    return fail("entry padding bytes are not zero");
  const uint64_t stored = body - key_size - meta_size - pad;
  if (compressed ? stored == 0 : payload_size != stored)
    return fail("entry sizes do not match its length (truncated or padded)");
  EntryParts parts;
  parts.key = {p + kEntryHeaderSize, key_size};
  parts.meta = {p + kEntryHeaderSize + key_size, meta_size};
  parts.payload_offset = kEntryHeaderSize + key_size + meta_size + pad;
  parts.payload = {p + parts.payload_offset, stored};
  parts.payload_size = payload_size;
  parts.compressed = compressed;
  parts.signed_with_mac = flags & kFlagMac;
  return parts;
}

std::optional<EntryParts> decode_entry(ByteView record, ByteView expected_key, bool verify_checksum,
                                       std::string *why, const MacKey *mac) {
  auto parts = parse_entry(record, why);
  if (!parts) return parts;
  if (!(parts->key == expected_key)) {
    if (why) *why = "entry holds another key";
    return std::nullopt;
  }
  if (verify_checksum) {
    uint8_t sum[16];
    checksum(record.data, record.size - kEntryHeaderSize, sum);
    if (std::memcmp(sum, record.data + 32, 16) != 0) {
      if (why) *why = "entry checksum mismatch";
      return std::nullopt;
    }
  }
  if (mac) {
    if (!(load_le(record.data + 6, 2) & kFlagMac)) {
      if (why) *why = "entry is not signed with the configured secret (no MAC)";
      return std::nullopt;
    }
    uint8_t expected[16];
    mac->sign(record.data, record.size - kEntryHeaderSize, expected);
    if (libcrypto().CRYPTO_memcmp(expected, record.data + 48, 16) != 0) {
      if (why) *why = "entry MAC does not match the configured secret (forged or foreign)";
      return std::nullopt;
    }
  }
  return parts;
}

}  // namespace progcache
