#include "memory/store_format.h"

#include <bit>
#include <cstring>

#include "base/hash.h"
#include "base/sha256.h"
#include "base/hex.h"
#include "memory/le_bytes.h"

namespace rw::memory {

namespace {

constexpr char kBlobMagic[8] = {'R', 'W', 'B', 'L', 'O', 'B', '\0', '\1'};
constexpr char kIndexMagic[8] = {'R', 'W', 'S', 'T', 'I', 'D', 'X', '\1'};
constexpr size_t kHeaderBytes = 64;
constexpr size_t kEntryBytes = 48;
constexpr int32_t kMaxTokens = 1 << 26;

std::string Key(char kind, int32_t end, uint64_t chain) {
  return std::string(1, kind) + "-" + std::to_string(end) + "-" + HexU64(chain);
}

}  // namespace

uint64_t StoreIdentity(uint64_t model_fingerprint, std::string_view kv_types) {
  uint64_t h = HashMix(model_fingerprint, kStoreFormatVersion);
  h = HashMix(h, kKernelBitsGeneration);
  return HashMix(h, HashString(kv_types));
}

std::string PageKey(int32_t end, uint64_t chain) { return Key('p', end, chain); }
std::string StateKey(int32_t end, uint64_t chain) { return Key('s', end, chain); }

std::string EncodeBlobHead(uint64_t identity, BlobKind kind, int32_t first, std::span<const int32_t> tokens,
                           uint64_t parent, std::string_view payload) {
  std::string head;
  head.reserve(kHeaderBytes + tokens.size() * 4 + 8);
  head.append(kBlobMagic, 8);
  Put<uint32_t>(&head, kStoreFormatVersion);
  Put<uint32_t>(&head, static_cast<uint32_t>(kind));
  Put<uint64_t>(&head, identity);
  Put<int32_t>(&head, first);
  Put<int32_t>(&head, first + static_cast<int32_t>(tokens.size()));
  Put<uint64_t>(&head, HashTokens(tokens, parent));
  Put<uint64_t>(&head, parent);
  Put<uint64_t>(&head, payload.size());
  Put<uint64_t>(&head, ChecksumBytes(payload.data(), payload.size()));
  for (int32_t t : tokens) Put<int32_t>(&head, t);
  Put<uint64_t>(&head, ChecksumBytes(head.data(), head.size()));
  return head;
}

std::string EncodeBlob(uint64_t identity, BlobKind kind, int32_t first, std::span<const int32_t> tokens,
                       uint64_t parent, std::string_view payload) {
  std::string out = EncodeBlobHead(identity, kind, first, tokens, parent, payload);
  out.append(payload);
  return out;
}

Expected<Blob> DecodeBlob(std::string_view b, uint64_t identity, BlobKind kind, int32_t end, uint64_t chain) {
  if (b.size() < kHeaderBytes + 8) return Error::Corrupt("store value truncated (" + std::to_string(b.size()) + " B)");
  if (std::memcmp(b.data(), kBlobMagic, 8) != 0) return Error::Corrupt("not a rewind store value (bad magic)");
  if (const uint32_t v = Get<uint32_t>(b, 8); v != kStoreFormatVersion)
    return Error::Unsupported("store value of format " + std::to_string(v) + ", this build reads " +
                              std::to_string(kStoreFormatVersion));
  Blob out;
  out.kind = static_cast<BlobKind>(Get<uint32_t>(b, 12));
  out.first = Get<int32_t>(b, 24);
  out.end = Get<int32_t>(b, 28);
  if (out.first < 0 || out.end <= out.first || out.end > kMaxTokens) return Error::Corrupt("store value span invalid");
  const size_t head_end = kHeaderBytes + static_cast<size_t>(out.end - out.first) * 4;
  if (b.size() < head_end + 8) return Error::Corrupt("store value truncated in its tokens");
  if (ChecksumBytes(b.data(), head_end) != Get<uint64_t>(b, head_end)) return Error::Corrupt("store value header checksum mismatch");
  if (Get<uint64_t>(b, 16) != identity)
    return Error::Unsupported("store value is for another model, KV type or page size");
  out.chain = Get<uint64_t>(b, 32);
  out.parent = Get<uint64_t>(b, 40);
  if (out.kind != kind || out.end != end || out.chain != chain)
    return Error::Corrupt("store value is not the one its key names");
  const uint64_t payload_bytes = Get<uint64_t>(b, 48);
  const size_t payload_at = head_end + 8;
  if (payload_bytes != b.size() - payload_at)
    return Error::Corrupt("store value payload is " + std::to_string(b.size() - payload_at) + " B, header says " +
                          std::to_string(payload_bytes) + " B (torn write?)");
  if (ChecksumBytes(b.data() + payload_at, payload_bytes) != Get<uint64_t>(b, 56))
    return Error::Corrupt("store value payload checksum mismatch");
  out.tokens.resize(static_cast<size_t>(out.end - out.first));
  std::memcpy(out.tokens.data(), b.data() + kHeaderBytes, out.tokens.size() * 4);
  if (HashTokens(out.tokens, out.parent) != out.chain) return Error::Corrupt("store value tokens do not match its hash");
  out.payload.assign(b.data() + payload_at, payload_bytes);
  return out;
}

namespace {

Digest256 ValueMac(std::string_view mac_key, std::string_view name, std::string_view blob) {
  static constexpr uint8_t kSeparator = 0;
  auto bytes = [](std::string_view s) { return std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()); };
  const std::span<const uint8_t> parts[3] = {bytes(name), std::span<const uint8_t>(&kSeparator, 1), bytes(blob)};
  return HmacSha256(bytes(mac_key), parts);
}

}  // namespace

void SealValue(std::string_view mac_key, std::string_view name, std::string* blob) {
  const Digest256 tag = ValueMac(mac_key, name, *blob);
  blob->append(reinterpret_cast<const char*>(tag.data()), tag.size());
}

Expected<std::string_view> OpenSealedValue(std::string_view mac_key, std::string_view name, std::string_view value) {
  if (value.size() < kValueMacBytes) return Error::Corrupt("store value shorter than its MAC");
  const std::string_view blob = value.substr(0, value.size() - kValueMacBytes);
  Digest256 tag{};
  std::memcpy(tag.data(), value.data() + blob.size(), kValueMacBytes);
  if (!DigestEqual(tag, ValueMac(mac_key, name, blob)))
    return Error::Corrupt("store value MAC mismatch (written without this replica's --remote-cache-key)");
  return blob;
}

std::string MacKeyId(std::string_view mac_key) {
  if (mac_key.empty()) return "trust";
  return DigestHex(HmacSha256(mac_key, "rewind key id")).substr(0, 16);
}

// Index: magic (8), u32 version, u32 count, u64 identity, u64 clock, entries of kEntryBytes {u32 kind, i32 end,
// u64 chain, u64 parent, u64 bytes, i64 saved tokens, u64 last use}, u64 checksum of everything before.
std::string EncodeStoreIndex(uint64_t identity, uint64_t clock, std::span<const StoreEntry> entries) {
  std::string out(kIndexMagic, 8);
  out.reserve(40 + entries.size() * kEntryBytes);
  Put<uint32_t>(&out, kStoreFormatVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(entries.size()));
  Put<uint64_t>(&out, identity);
  Put<uint64_t>(&out, clock);
  for (const StoreEntry& e : entries) {
    Put<uint32_t>(&out, static_cast<uint32_t>(e.kind));
    Put<int32_t>(&out, e.end);
    Put<uint64_t>(&out, e.chain);
    Put<uint64_t>(&out, e.parent);
    Put<uint64_t>(&out, e.bytes);
    Put<int64_t>(&out, e.saved_tokens);
    Put<uint64_t>(&out, e.last_use);
  }
  Put<uint64_t>(&out, ChecksumBytes(out.data(), out.size()));
  return out;
}

Expected<StoreIndex> DecodeStoreIndex(std::string_view b, uint64_t identity) {
  if (b.size() < 40) return Error::Corrupt("store index truncated");
  if (std::memcmp(b.data(), kIndexMagic, 8) != 0) return Error::Corrupt("not a rewind store index (bad magic)");
  if (ChecksumBytes(b.data(), b.size() - 8) != Get<uint64_t>(b, b.size() - 8))
    return Error::Corrupt("store index checksum mismatch (torn or corrupt)");
  if (const uint32_t v = Get<uint32_t>(b, 8); v != kStoreFormatVersion)
    return Error::Unsupported("store index of format " + std::to_string(v));
  if (Get<uint64_t>(b, 16) != identity) return Error::Unsupported("store index is for another model, KV type or page size");
  const uint32_t count = Get<uint32_t>(b, 12);
  if (b.size() != 40 + size_t{count} * kEntryBytes) return Error::Corrupt("store index size does not match its count");
  StoreIndex idx;
  idx.clock = Get<uint64_t>(b, 24);
  idx.entries.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const size_t at = 32 + size_t{i} * kEntryBytes;
    StoreEntry& e = idx.entries[i];
    const uint32_t kind = Get<uint32_t>(b, at);
    if (kind != 1 && kind != 2) return Error::Corrupt("store index entry of unknown kind");
    e.kind = static_cast<BlobKind>(kind);
    e.end = Get<int32_t>(b, at + 4);
    e.chain = Get<uint64_t>(b, at + 8);
    e.parent = Get<uint64_t>(b, at + 16);
    e.bytes = Get<uint64_t>(b, at + 24);
    e.saved_tokens = Get<int64_t>(b, at + 32);
    e.last_use = Get<uint64_t>(b, at + 40);
    if (e.end <= 0 || e.end > kMaxTokens || e.saved_tokens < 0) return Error::Corrupt("store index entry malformed");
  }
  return idx;
}

}  // namespace rw::memory
