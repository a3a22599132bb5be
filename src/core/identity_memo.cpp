#include "core/identity_memo.hpp"

#include <atomic>
#include <cstring>
#include <optional>
#include <string>

#include "util/byte_io.hpp"
#include "util/error.hpp"
#include "util/hex.hpp"
#include "util/xxhash.hpp"

namespace progcache {
namespace {

constexpr std::string_view kMagic = "PCI1";

std::atomic<size_t> g_programs_looked_for{0};

std::string memo_name(std::string_view encoding) {
  const std::array<uint8_t, 16> h = xxh3_128(encoding.data(), encoding.size());
  return "identity/" + to_hex(ByteView(h.data(), h.size()));
}

// The record: the schema the identity was hashed under, the identity, then the encoding itself,
// which a recall compares with the program's.
std::optional<Key> recall(MemoStore *memos, std::string_view encoding) {
  const std::optional<std::string> record = memos->load_memo(memo_name(encoding));
  if (!record) return std::nullopt;
  ByteReader r(*record);
  if (r.bytes(kMagic.size()) != kMagic || !is_identity_schema(r.str(256))) return std::nullopt;
  const std::string_view identity = r.bytes(kKeySize);
  if (r.failed() || r.rest() != encoding) return std::nullopt;
  Key k;
  std::memcpy(k.data(), identity.data(), k.size());
  return k;
}

}  // namespace

std::optional<Key> recall_identity(MemoStore *memos, const ProgramDesc &program,
                                   const KeyContext &context) {
  return recall(memos, identity_encoding(program, context));
}

FoundIdentity find_identity(MemoStore *memos, const ProgramDesc &program,
                            const KeyContext &context) {
  FoundIdentity found;
  // Lengths first: most programs are small, and a large one is never memoised.
  const bool may_recall =
      memos && program.code_type == CodeType::cxx && program.source.size <= kMaxIdentityMemoBytes &&
      !key_hash_at_hand() &&
      g_programs_looked_for.fetch_add(1, std::memory_order_relaxed) < kIdentityMemoPrograms;
  if (may_recall) {
    const std::string encoding = identity_encoding(program, context);
    if (encoding.size() <= kMaxIdentityMemoBytes) {
      if (const std::optional<Key> k = recall(memos, encoding)) {
        found.identity = *k;
        found.from = FoundIdentity::From::memo;
        return found;
      }
      found.from = FoundIdentity::From::memo_missing;
    }
  }
  found.identity = identity_key(program, context);
  return found;
}

void remember_identity(MemoStore *memos, const ProgramDesc &program, const KeyContext &context,
                       const Key &identity) {
  if (!memos || program.code_type != CodeType::cxx || program.source.size > kMaxIdentityMemoBytes)
    return;
  try {
    const std::string encoding = identity_encoding(program, context);
    if (encoding.size() > kMaxIdentityMemoBytes) return;
    ByteWriter w;
    w.bytes(kMagic);
    w.str(identity_schema());
    w.bytes(std::string_view(reinterpret_cast<const char *>(identity.data()), identity.size()));
    w.bytes(encoding);
    memos->save_memo(memo_name(encoding), w.data());
  } catch (const Error &) {  // a memo only saves work
  }
}

}  // namespace progcache
