// The public header compiles alone as C++, declares C linkage, and its ABI facts hold: struct
// sizes and offsets (what an older or newer caller relies on) and status values (append-only).
#include <progcache/progcache.h>

#include <cstddef>
#include <type_traits>

static_assert(std::is_same_v<pcache_status, int32_t>);
static_assert(std::is_standard_layout_v<pcache_options> && std::is_trivial_v<pcache_options>);

// Growable structs: the first published sizes never shrink, fields never move.
static_assert(sizeof(pcache_options) == 32);  // version 1 was 16 bytes: still accepted
static_assert(offsetof(pcache_options, struct_size) == 0);
static_assert(offsetof(pcache_options, flags) == 4);
static_assert(offsetof(pcache_options, max_size_bytes) == 8);
static_assert(offsetof(pcache_options, secret) == 16 &&
              offsetof(pcache_options, secret_size) == 24);
static_assert(PCACHE_OPEN_ALLOW_SHARED == 1 && PCACHE_OPEN_ALLOW_PRIVILEGED == 2);
static_assert(sizeof(pcache_stats) == 104);
static_assert(offsetof(pcache_stats, hits) == 8);
static_assert(offsetof(pcache_stats, corrupt) == 64);
static_assert(offsetof(pcache_stats, healed) == 72);
static_assert(offsetof(pcache_stats, tier_errors) == 80);
static_assert(offsetof(pcache_stats, tier_skips) == 88);
static_assert(sizeof(pcache_view) == 24);
static_assert(offsetof(pcache_program, name) == 16);
static_assert(offsetof(pcache_program, source_size) == 32);
static_assert(offsetof(pcache_program, extra_digest_size) == 104);
static_assert(offsetof(pcache_program, header_sizes) == 112);  // version 0.5
static_assert(sizeof(pcache_program) == 120);

// Status codes are part of the ABI: append only, never renumber.
static_assert(PCACHE_OK == 0 && PCACHE_NOT_FOUND == 1);
static_assert(PCACHE_ERR_INVALID_ARG == -1 && PCACHE_ERR_NO_MEMORY == -2 && PCACHE_ERR_IO == -3);
static_assert(PCACHE_ERR_CORRUPT == -4 && PCACHE_ERR_UNSUPPORTED == -5 && PCACHE_ERR_BUSY == -6);
static_assert(PCACHE_ERR_PERMISSION == -7 && PCACHE_ERR_TOO_LARGE == -8);
static_assert(PCACHE_ERR_COMPILE == -9 && PCACHE_ERR_CUDA_UNAVAILABLE == -10);
static_assert(PCACHE_ERR_CUDA == -11 && PCACHE_ERR_REMOTE == -12 && PCACHE_ERR_INTERNAL == -13);
static_assert(PCACHE_CODE_CXX == 0 && PCACHE_CODE_PTX == 1 && PCACHE_CODE_NVVM == 2);
static_assert(PCACHE_TARGET_CUBIN == 0 && PCACHE_TARGET_PTX == 1 && PCACHE_TARGET_LTOIR == 2);
static_assert(PCACHE_KEY_SIZE == 32 && PCACHE_MAX_KEY_SIZE == 65536);
static_assert(PCACHE_VERSION_NUMBER ==
              PCACHE_VERSION_MAJOR * 10000 + PCACHE_VERSION_MINOR * 100 + PCACHE_VERSION_PATCH);

int header_test_cxx();  // referenced by nothing: the file only has to compile
int header_test_cxx() {
  return PCACHE_ERR_INTERNAL;
}
