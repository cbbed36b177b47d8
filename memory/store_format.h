// Values of the content-addressed store (memory/content_store.h), little endian, each checksummed and
// self-describing so that a value is never misread: a torn, corrupt, foreign (other model, KV type, page size,
// format) or mismatched value is rejected as a whole.
//
// Every value is named by the chained hash of the token prefix it ends: c(n) = HashTokens(tokens[0, n), identity),
// which extends page by page (c((k+1)P) = HashTokens(page k's tokens, c(kP))). `identity` mixes everything that
// decides the bits: the model file's fingerprint, KV type, page size, this format and the kernels' bit generation.
//
//   page  "p-<end>-<c(end) hex>": K/V rows of positions [first, end), first = ((end-1)/P)*P: a full page, or the
//         partial last page of a checkpoint. Shared by every prefix that contains it.
//   state "s-<end>-<c(end) hex>": the recurrent state after tokens [0, end) (one per checkpoint); it carries the
//         tokens of its last page span [first, end) like a page, so its size does not grow with the prefix.
//   index "index": the list of pages and states (memory/content_store.h rebuilds its maps from it at start).
//
// Blob layout: [0] magic "RWBLOB\0\1" [8] u32 version [12] u32 kind (1 page, 2 state) [16] u64 identity
// [24] i32 first [28] i32 end [32] u64 c(end) [40] u64 c(first) [48] u64 payload bytes
// [56] u64 payload checksum [64] i32 tokens[first, end) then u64 checksum of everything before, then the payload.
// Checksums are ChecksumBytes (base/hash.h).
// A page's payload is [attention layer][K | V][end - first rows][row bytes].
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"

namespace rw::memory {

// 3: checksums by ChecksumBytes (base/hash.h) instead of byte-serial FNV-1a.
inline constexpr uint32_t kStoreFormatVersion = 3;
// Bumped when a kernel change alters the bits of K/V or states (never so far: docs/exactness.md).
inline constexpr uint32_t kKernelBitsGeneration = 1;

enum class BlobKind : uint32_t { kPage = 1, kState = 2 };

// The hash every key and chain starts from.
// kv_types: the KV cache types as persisted files name them ("f16", "q8_0/f16").
uint64_t StoreIdentity(uint64_t model_fingerprint, std::string_view kv_types);

std::string PageKey(int32_t end, uint64_t chain);
std::string StateKey(int32_t end, uint64_t chain);
inline constexpr const char* kIndexKey = "index";

struct Blob {
  BlobKind kind = BlobKind::kPage;
  int32_t first = 0, end = 0;
  uint64_t chain = 0;    // c(end)
  uint64_t parent = 0;   // c(first)
  std::vector<int32_t> tokens;  // [first, end)
  std::string payload;
};

// The value's bytes are EncodeBlobHead(...) followed by the payload: a writer can store the two without copying
// a large payload (StoreBackend::PutParts).
std::string EncodeBlobHead(uint64_t identity, BlobKind kind, int32_t first, std::span<const int32_t> tokens,
                           uint64_t parent, std::string_view payload);
std::string EncodeBlob(uint64_t identity, BlobKind kind, int32_t first, std::span<const int32_t> tokens,
                       uint64_t parent, std::string_view payload);
// Validates everything, including that c(end) == HashTokens(tokens, parent) and that the value is the one
// asked for (kind, end, chain). kCorrupt or kUnsupported (other version or identity).
Expected<Blob> DecodeBlob(std::string_view bytes, uint64_t identity, BlobKind kind, int32_t end, uint64_t chain);

// Values of a store others can write to (the remote tier, docs/replicas.md) are authenticated: the stored value
// is the blob followed by HMAC-SHA256(mac_key, name || 0 || blob), 32 bytes, where `name` is the key the value is
// stored under. Without the key nobody can make a value this check accepts, nor move a value to another key. An
// empty mac_key (the remote tier's --remote-cache-trust) keeps the layout but authenticates nothing: anyone can
// compute that tag.
inline constexpr size_t kValueMacBytes = 32;
// Appends the tag to `blob` (in place: no copy of the payload).
void SealValue(std::string_view mac_key, std::string_view name, std::string* blob);
// The blob part of a sealed value; kCorrupt when the value is shorter than a tag or the tag does not match.
Expected<std::string_view> OpenSealedValue(std::string_view mac_key, std::string_view name, std::string_view value);
// A short public name of a MAC key (hex of HMAC(key, "rewind key id"), 16 characters; "trust" for the empty
// key): mixed into the key namespace so that replicas with different keys never read or delete each other's
// values, and printed in logs without revealing the key.
std::string MacKeyId(std::string_view mac_key);

// One index entry (fixed 48 bytes on disk).
struct StoreEntry {
  BlobKind kind = BlobKind::kPage;
  int32_t end = 0;
  uint64_t chain = 0;
  uint64_t parent = 0;        // pages: c(first) of the page before (identity for the first page)
  uint64_t bytes = 0;         // size of the value
  int64_t saved_tokens = 0;   // states: prefill the state saves beyond the previous checkpoint of its path
  uint64_t last_use = 0;      // the store's logical clock
};

std::string EncodeStoreIndex(uint64_t identity, uint64_t clock, std::span<const StoreEntry> entries);
struct StoreIndex {
  uint64_t clock = 0;
  std::vector<StoreEntry> entries;
};
Expected<StoreIndex> DecodeStoreIndex(std::string_view bytes, uint64_t identity);

}  // namespace rw::memory
