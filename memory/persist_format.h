// On-disk format of persisted checkpoints (I5): one versioned, checksummed file per checkpoint plus an index.
// Writers go through rw::WriteFileAtomic; readers validate everything (magic, version, sizes, model fingerprint,
// token-prefix hash, header and payload checksums) and reject torn, corrupt or foreign files as a whole.
//
// Checkpoint file, little endian:
//   [0]  magic "RWCKPT\0\1" (8)   [8] u32 version   [12] u32 header bytes (= 80)
//   [16] u64 model fingerprint    [24] i32 pos      [28] u32 reserved (0)
//   [32] u64 prefix hash          [40] u64 state bytes   [48] u64 kv bytes   [56] u64 payload checksum
//   [64] char kv_type[16]: the KV cache's element types as text ("f16", "q8_0/f16" for K/V), NUL-padded
//   [80] i32 tokens[pos]          then u64 checksum of bytes [0, 80 + 4*pos)
//   then state bytes, then kv bytes (the pages' K/V for [0, pos), in page order, rows in the cache's types).
//   Nothing after. Version 1 (64-byte header, no kv_type) is refused: its rows could be F16 or F32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::memory {

inline constexpr uint32_t kCheckpointFileVersion = 2;
inline constexpr size_t kMaxKvTypeLabel = 15;

struct CheckpointFile {
  uint64_t model_fingerprint = 0;
  std::string kv_type;          // the label the file was written with
  std::vector<int32_t> tokens;  // the prefix [0, pos); pos = tokens.size()
  uint64_t prefix_hash = 0;     // rw::HashTokens(tokens)
  std::string state;            // [state_bytes] recurrent state
  std::string kv;               // [kv_bytes] attention pages
};

// What a file must match to be read: the model and the KV cache's element types (an opaque label here, at most
// kMaxKvTypeLabel characters, e.g. "q8_0/f16").
struct CheckpointKey {
  uint64_t model_fingerprint = 0;
  std::string_view kv_type;
};

// Serialises one checkpoint. `kv_parts` are concatenated in order (one span per page).
std::string EncodeCheckpointFile(const CheckpointKey& key, std::span<const int32_t> tokens,
                                 std::span<const std::byte> state,
                                 std::span<const std::span<const std::byte>> kv_parts);
// Validates and decodes; errors: kCorrupt (torn, bad magic, checksum, sizes), kUnsupported (version, foreign
// model fingerprint, other KV cache types: the message names both).
Expected<CheckpointFile> DecodeCheckpointFile(std::string_view bytes, const CheckpointKey& expected);

Status WriteCheckpointFile(const std::string& path, const CheckpointKey& key, std::span<const int32_t> tokens,
                           std::span<const std::byte> state, std::span<const std::span<const std::byte>> kv_parts);
Expected<CheckpointFile> ReadCheckpointFile(const std::string& path, const CheckpointKey& expected);

// The index: which checkpoint files exist, so a restarted server can rebuild its tree without opening each.
struct CheckpointIndexEntry {
  std::string file;            // name relative to the index's directory (no '/')
  int32_t pos = 0;
  uint64_t prefix_hash = 0;
  uint64_t bytes = 0;          // file size
};

std::string EncodeCheckpointIndex(uint64_t model_fingerprint, std::span<const CheckpointIndexEntry> entries);
Expected<std::vector<CheckpointIndexEntry>> DecodeCheckpointIndex(std::string_view bytes,
                                                                  uint64_t expected_fingerprint);
Status WriteCheckpointIndex(const std::string& path, uint64_t model_fingerprint,
                            std::span<const CheckpointIndexEntry> entries);
Expected<std::vector<CheckpointIndexEntry>> ReadCheckpointIndex(const std::string& path,
                                                                uint64_t expected_fingerprint);

}  // namespace rw::memory
