#include "memory/persist_format.h"

#include <bit>
#include <cstring>

#include "base/check.h"
#include "base/file.h"
#include "base/hash.h"
#include "base/hex.h"
#include "memory/le_bytes.h"

namespace rw::memory {

namespace {

constexpr char kMagic[8] = {'R', 'W', 'C', 'K', 'P', 'T', '\0', '\1'};
constexpr char kIndexMagic[8] = {'R', 'W', 'C', 'K', 'I', 'D', 'X', '\1'};
constexpr uint32_t kHeaderBytes = 80;
constexpr size_t kKvTypeAt = 64;
constexpr int32_t kMaxTokens = 1 << 26;

Error Foreign(uint64_t got, uint64_t want) {
  return Error::Unsupported("checkpoint file is for another model (fingerprint " + HexU64(got) + ", this model " +
                            HexU64(want) + ")");
}

}  // namespace

std::string EncodeCheckpointFile(const CheckpointKey& key, std::span<const int32_t> tokens,
                                 std::span<const std::byte> state,
                                 std::span<const std::span<const std::byte>> kv_parts) {
  REWIND_CHECK_MSG(!key.kv_type.empty() && key.kv_type.size() <= kMaxKvTypeLabel, "KV type label '%.*s'",
                   static_cast<int>(key.kv_type.size()), key.kv_type.data());
  uint64_t kv_bytes = 0;
  uint64_t sum = kFnvOffset;
  sum = HashBytes(state.data(), state.size(), sum);
  for (auto part : kv_parts) {
    kv_bytes += part.size();
    sum = HashBytes(part.data(), part.size(), sum);
  }
  std::string out;
  out.reserve(kHeaderBytes + tokens.size() * 4 + 8 + state.size() + kv_bytes);
  out.append(kMagic, 8);
  Put<uint32_t>(&out, kCheckpointFileVersion);
  Put<uint32_t>(&out, kHeaderBytes);
  Put<uint64_t>(&out, key.model_fingerprint);
  Put<int32_t>(&out, static_cast<int32_t>(tokens.size()));
  Put<uint32_t>(&out, 0);
  Put<uint64_t>(&out, HashTokens(tokens));
  Put<uint64_t>(&out, state.size());
  Put<uint64_t>(&out, kv_bytes);
  Put<uint64_t>(&out, sum);
  out.append(key.kv_type);
  out.append(16 - key.kv_type.size(), '\0');
  for (int32_t t : tokens) Put<int32_t>(&out, t);
  Put<uint64_t>(&out, HashBytes(out.data(), out.size()));
  out.append(reinterpret_cast<const char*>(state.data()), state.size());
  for (auto part : kv_parts) out.append(reinterpret_cast<const char*>(part.data()), part.size());
  return out;
}

Expected<CheckpointFile> DecodeCheckpointFile(std::string_view b, const CheckpointKey& expected) {
  const uint64_t expected_fingerprint = expected.model_fingerprint;
  if (b.size() < 16) return Error::Corrupt("checkpoint file truncated (" + std::to_string(b.size()) + " B)");
  if (std::memcmp(b.data(), kMagic, 8) != 0) return Error::Corrupt("not a rewind checkpoint file (bad magic)");
  uint32_t version = Get<uint32_t>(b, 8);
  if (version != kCheckpointFileVersion)
    return Error::Unsupported("checkpoint file version " + std::to_string(version) + ", this build reads " +
                              std::to_string(kCheckpointFileVersion));
  if (b.size() < kHeaderBytes + 8) return Error::Corrupt("checkpoint file truncated (" + std::to_string(b.size()) + " B)");
  if (Get<uint32_t>(b, 12) != kHeaderBytes || Get<uint32_t>(b, 28) != 0)
    return Error::Corrupt("checkpoint header malformed");
  int32_t pos = Get<int32_t>(b, 24);
  if (pos < 0 || pos > kMaxTokens) return Error::Corrupt("checkpoint position " + std::to_string(pos) + " invalid");
  const size_t head_end = kHeaderBytes + static_cast<size_t>(pos) * 4;
  if (b.size() < head_end + 8) return Error::Corrupt("checkpoint file truncated in its token prefix");
  if (HashBytes(b.data(), head_end) != Get<uint64_t>(b, head_end))
    return Error::Corrupt("checkpoint header checksum mismatch");
  uint64_t fingerprint = Get<uint64_t>(b, 16);
  if (fingerprint != expected_fingerprint) return Foreign(fingerprint, expected_fingerprint);
  const std::string_view label_field = b.substr(kKvTypeAt, 16);
  const std::string kv_type(label_field.substr(0, std::min(label_field.find('\0'), kMaxKvTypeLabel)));
  if (kv_type != expected.kv_type)
    return Error::Unsupported("checkpoint file holds a KV cache of type " + kv_type + ", this cache is " +
                              std::string(expected.kv_type) + " (--cache-type-k / --cache-type-v)");
  uint64_t state_bytes = Get<uint64_t>(b, 40), kv_bytes = Get<uint64_t>(b, 48);
  const size_t payload_at = head_end + 8;
  const uint64_t left = b.size() - payload_at;
  if (state_bytes > left || kv_bytes > left - state_bytes || state_bytes + kv_bytes != left)
    return Error::Corrupt("checkpoint payload is " + std::to_string(left) + " B, header says " +
                          std::to_string(state_bytes) + " + " + std::to_string(kv_bytes) + " B (torn write?)");
  if (HashBytes(b.data() + payload_at, left) != Get<uint64_t>(b, 56))
    return Error::Corrupt("checkpoint payload checksum mismatch");
  CheckpointFile f;
  f.model_fingerprint = fingerprint;
  f.kv_type = kv_type;
  f.tokens.resize(static_cast<size_t>(pos));
  if (pos > 0) std::memcpy(f.tokens.data(), b.data() + kHeaderBytes, static_cast<size_t>(pos) * 4);
  f.prefix_hash = Get<uint64_t>(b, 32);
  if (HashTokens(f.tokens) != f.prefix_hash) return Error::Corrupt("checkpoint token prefix does not match its hash");
  f.state.assign(b.data() + payload_at, state_bytes);
  f.kv.assign(b.data() + payload_at + state_bytes, kv_bytes);
  return f;
}

Status WriteCheckpointFile(const std::string& path, const CheckpointKey& key, std::span<const int32_t> tokens,
                           std::span<const std::byte> state, std::span<const std::span<const std::byte>> kv_parts) {
  return WriteFileAtomic(path, EncodeCheckpointFile(key, tokens, state, kv_parts));
}

Expected<CheckpointFile> ReadCheckpointFile(const std::string& path, const CheckpointKey& expected) {
  REWIND_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  auto f = DecodeCheckpointFile(bytes, expected);
  if (!f.ok()) return Error{f.error().kind, path + ": " + f.error().message};
  return f;
}

// Index: magic (8), u32 version, u32 count, u64 fingerprint, entries {u32 name length, name, i32 pos,
// u64 prefix hash, u64 bytes}, u64 checksum of everything before it.
std::string EncodeCheckpointIndex(uint64_t model_fingerprint, std::span<const CheckpointIndexEntry> entries) {
  std::string out(kIndexMagic, 8);
  Put<uint32_t>(&out, kCheckpointFileVersion);
  Put<uint32_t>(&out, static_cast<uint32_t>(entries.size()));
  Put<uint64_t>(&out, model_fingerprint);
  for (const auto& e : entries) {
    Put<uint32_t>(&out, static_cast<uint32_t>(e.file.size()));
    out += e.file;
    Put<int32_t>(&out, e.pos);
    Put<uint64_t>(&out, e.prefix_hash);
    Put<uint64_t>(&out, e.bytes);
  }
  Put<uint64_t>(&out, HashBytes(out.data(), out.size()));
  return out;
}

Expected<std::vector<CheckpointIndexEntry>> DecodeCheckpointIndex(std::string_view b,
                                                                  uint64_t expected_fingerprint) {
  if (b.size() < 32) return Error::Corrupt("checkpoint index truncated");
  if (std::memcmp(b.data(), kIndexMagic, 8) != 0) return Error::Corrupt("not a rewind checkpoint index (bad magic)");
  if (HashBytes(b.data(), b.size() - 8) != Get<uint64_t>(b, b.size() - 8))
    return Error::Corrupt("checkpoint index checksum mismatch (torn or corrupt)");
  uint32_t version = Get<uint32_t>(b, 8);
  if (version != kCheckpointFileVersion)
    return Error::Unsupported("checkpoint index version " + std::to_string(version));
  uint64_t fingerprint = Get<uint64_t>(b, 16);
  if (fingerprint != expected_fingerprint) return Foreign(fingerprint, expected_fingerprint);
  uint32_t count = Get<uint32_t>(b, 12);
  std::vector<CheckpointIndexEntry> out;
  size_t at = 24;
  const size_t end = b.size() - 8;
  for (uint32_t i = 0; i < count; ++i) {
    if (end - at < 4) return Error::Corrupt("checkpoint index entry " + std::to_string(i) + " truncated");
    uint32_t len = Get<uint32_t>(b, at);
    at += 4;
    if (len == 0 || len > 4096 || end - at < len + 20)
      return Error::Corrupt("checkpoint index entry " + std::to_string(i) + " malformed");
    CheckpointIndexEntry e;
    e.file.assign(b.data() + at, len);
    at += len;
    if (e.file.find('/') != std::string::npos || e.file == "." || e.file == "..")
      return Error::Corrupt("checkpoint index names a path outside its directory: '" + e.file + "'");
    e.pos = Get<int32_t>(b, at);
    e.prefix_hash = Get<uint64_t>(b, at + 4);
    e.bytes = Get<uint64_t>(b, at + 12);
    at += 20;
    if (e.pos < 0) return Error::Corrupt("checkpoint index entry with negative position");
    out.push_back(std::move(e));
  }
  if (at != end) return Error::Corrupt("checkpoint index has trailing bytes");
  return out;
}

Status WriteCheckpointIndex(const std::string& path, uint64_t model_fingerprint,
                            std::span<const CheckpointIndexEntry> entries) {
  return WriteFileAtomic(path, EncodeCheckpointIndex(model_fingerprint, entries));
}

Expected<std::vector<CheckpointIndexEntry>> ReadCheckpointIndex(const std::string& path,
                                                                uint64_t expected_fingerprint) {
  REWIND_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(path));
  auto r = DecodeCheckpointIndex(bytes, expected_fingerprint);
  if (!r.ok()) return Error{r.error().kind, path + ": " + r.error().message};
  return r;
}

}  // namespace rw::memory
