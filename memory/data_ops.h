// The data operations a committed plan asks the storage owner to perform, in order. memory/ never touches
// bytes; these name buffers by id. Pages that become free need no operation (their bytes are simply reused).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "memory/ids.h"

namespace rw::memory {

// Copy every attention layer's K and V of page `from` into page `to` (copy-on-write of a shared last page).
struct CopyPageOp { PageId from = kNone, to = kNone; };
// Set a state slot to the state before any token (all zeros for GDN).
struct ZeroStateOp { SlotId slot = kNone; };
// Copy a live state into another slot (fork).
struct CopyStateOp { SlotId from = kNone, to = kNone; };
// Copy a checkpoint's bytes into a slot.
struct RestoreCheckpointOp { CheckpointId ckpt = kNone; SlotId slot = kNone; };
// Snapshot a slot into a new checkpoint buffer.
struct SaveCheckpointOp { SlotId slot = kNone; CheckpointId ckpt = kNone; };
// Rebuild a state from the replay log of the batch whose start state is in `from`: re-apply the recurrent
// updates of the first `count` tokens of that batch and write the result into `to` (count may be 0: a copy).
struct ReplayStateOp { SlotId from = kNone, to = kNone; int32_t count = 0; };
// The checkpoint's last holder let go: release its buffer.
struct FreeCheckpointOp { CheckpointId ckpt = kNone; };

using DataOp = std::variant<CopyPageOp, ZeroStateOp, CopyStateOp, RestoreCheckpointOp, SaveCheckpointOp,
                            ReplayStateOp, FreeCheckpointOp>;

std::string ToString(const DataOp& op);
std::string ToString(const std::vector<DataOp>& ops);

}  // namespace rw::memory
