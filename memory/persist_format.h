// On-disk format of persisted checkpoints (I5): one versioned, checksummed file per checkpoint plus an index.
// Writers go through rw::WriteFileAtomic; readers validate everything (magic, version, sizes, model fingerprint,
// token-prefix hash, header and payload checksums) and reject torn, corrupt or foreign files as a whole.
//
// Checkpoint file, little endian:
//   [0]  magic "RWCKPT\0\1" (8)   [8] u32 version   [12] u32 header bytes (= 64)
//   [16] u64 model fingerprint    [24] i32 pos      [28] u32 reserved (0)
//   [32] u64 prefix hash          [40] u64 state bytes   [48] u64 kv bytes   [56] u64 payload checksum
//   [64] i32 tokens[pos]          then u64 checksum of bytes [0, 64 + 4*pos)
//   then state bytes, then kv bytes (the pages' K/V for [0, pos), in page order). Nothing after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::memory {

inline constexpr uint32_t kCheckpointFileVersion = 1;

struct CheckpointFile {
  uint64_t model_fingerprint = 0;
  std::vector<int32_t> tokens;  // the prefix [0, pos); pos = tokens.size()
  uint64_t prefix_hash = 0;     // rw::HashTokens(tokens)
  std::string state;            // [state_bytes] recurrent state
  std::string kv;               // [kv_bytes] attention pages
};

// Serialises one checkpoint. `kv_parts` are concatenated in order (one span per page).
std::string EncodeCheckpointFile(uint64_t model_fingerprint, std::span<const int32_t> tokens,
                                 std::span<const std::byte> state,
                                 std::span<const std::span<const std::byte>> kv_parts);
// Validates and decodes; errors: kCorrupt (torn, bad magic, checksum, sizes), kUnsupported (version, foreign
// model fingerprint).
Expected<CheckpointFile> DecodeCheckpointFile(std::string_view bytes, uint64_t expected_fingerprint);

Status WriteCheckpointFile(const std::string& path, uint64_t model_fingerprint, std::span<const int32_t> tokens,
                           std::span<const std::byte> state, std::span<const std::span<const std::byte>> kv_parts);
Expected<CheckpointFile> ReadCheckpointFile(const std::string& path, uint64_t expected_fingerprint);

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
