// KV pages and recurrent-state slots: layout, deep copies, snapshot / restore, sizes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <set>
#include <thread>

#include "model/kv_storage.h"
#include "model/state_storage.h"

namespace rw::model {
namespace {

TEST(KvStorage, PagesAreDisjointPerLayerAndCopyPageCopiesAllLayers) {
  auto kv = std::move(KvStorage::Create({2, 8, 4, 3, KvType::kF32})).value();
  EXPECT_EQ(kv->bytes_per_token(), 2u * 2 * 8 * 4);
  EXPECT_EQ(kv->total_bytes(), kv->bytes_per_page() * 3);
  EXPECT_EQ(kv->K(0, 1) - kv->K(0, 0), 4 * 8 * 4);
  EXPECT_EQ(kv->K(1, 0) - kv->K(0, 0), 3 * 4 * 8 * 4);
  for (int l = 0; l < 2; ++l) {
    std::memset(kv->K(l, 0), 0x11 + l, 4 * 8 * 4);
    std::memset(kv->V(l, 0), 0x21 + l, 4 * 8 * 4);
  }
  kv->CopyPage(0, 2, 3);
  for (int l = 0; l < 2; ++l) {
    EXPECT_EQ(kv->K(l, 2)[0], 0x11 + l);
    EXPECT_EQ(kv->V(l, 2)[3 * 8 * 4 - 1], 0x21 + l);
    EXPECT_EQ(kv->K(l, 2)[3 * 8 * 4], 0);  // row 3 not copied
  }
  auto f16 = std::move(KvStorage::Create({1, 8, 32, 2, KvType::kF16})).value();
  EXPECT_EQ(f16->bytes_per_token(), 2u * 8 * 2);
  EXPECT_FALSE(KvStorage::Create({1, 8, 0, 2, KvType::kF16}).ok());
}

TEST(KvStorage, RowsOfEachTypeHaveTheirBlockBytesAndKAndVMayDiffer) {
  // 2 layers, Hkv·D = 64 (D = 32), pages of 4 tokens: q8_0 K rows 68 B, q4_0 V rows 36 B.
  KvStorageConfig c{2, 64, 4, 3, KvTypes(KvType::kQ8_0, KvType::kQ4_0), 32};
  auto kv = std::move(KvStorage::Create(c)).value();
  EXPECT_EQ(kv->k_row_bytes(), 68u);
  EXPECT_EQ(kv->v_row_bytes(), 36u);
  EXPECT_EQ(kv->bytes_per_token(), 2u * (68 + 36));
  EXPECT_EQ(kv->K(0, 1) - kv->K(0, 0), 4 * 68);
  EXPECT_EQ(kv->V(1, 0) - kv->V(0, 0), 3 * 4 * 36);
  std::memset(kv->K(1, 0), 0x5a, 4 * 68);
  std::memset(kv->V(1, 0), 0x6b, 4 * 36);
  kv->CopyPage(0, 2, 2);
  EXPECT_EQ(kv->K(1, 2)[2 * 68 - 1], 0x5a);
  EXPECT_EQ(kv->K(1, 2)[2 * 68], 0);
  EXPECT_EQ(kv->V(1, 2)[2 * 36 - 1], 0x6b);
  EXPECT_EQ(kv->V(1, 2)[2 * 36], 0);
}

TEST(KvStorage, RefusesABlockTypeWhoseBlocksDoNotTileTheHeadsNamingTheDim) {
  auto r = KvStorage::Create({1, 96, 4, 2, KvType::kQ8_0, 48});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_NE(r.error().message.find("head dim 48"), std::string::npos) << r.error().message;
  EXPECT_TRUE(KvStorage::Create({1, 96, 4, 2, KvType::kBF16, 48}).ok());
  EXPECT_TRUE(CheckKvTypes(KvTypes(KvType::kF16, KvType::kIQ4_NL), 64).ok());
  EXPECT_FALSE(CheckKvTypes(KvTypes(KvType::kF16, KvType::kIQ4_NL), 16).ok());
}

TEST(StateStorage, CopySnapshotRestoreAreDeepAndExact) {
  StateShape shape{2, 6, 3, 2, 4};
  EXPECT_EQ(shape.bytes_per_state(), 4u * 2 * (6 * 3 + 2 * 16));
  auto st = std::move(StateStorage::Create(shape, 3)).value();
  for (int l = 0; l < 2; ++l) {
    st->Conv(0, l)[5] = 1.5f + l;
    st->Delta(0, l)[7] = -2.0f - l;
  }
  st->CopySlot(0, 1);
  EXPECT_EQ(st->Conv(1, 1)[5], 2.5f);
  EXPECT_EQ(st->Delta(1, 1)[7], -3.0f);
  StateCheckpoint cp = st->Snapshot(0);
  EXPECT_EQ(cp.bytes(), shape.bytes_per_state());
  st->Clear(0);
  EXPECT_EQ(st->Conv(0, 0)[5], 0.0f);
  EXPECT_EQ(cp.data()[5], 1.5f);  // the checkpoint is a separate copy
  ASSERT_TRUE(st->Restore(cp, 2).ok());
  EXPECT_EQ(std::memcmp(st->SlotData(2).data(), st->SlotData(1).data(), shape.bytes_per_state()), 0);
  StateCheckpoint wrong = StateCheckpoint::FromData(std::vector<float>(3));
  EXPECT_FALSE(st->Restore(wrong, 2).ok());
}

// The disk writer reads a persisted state through Share(): the bytes outlive the checkpoint, and a buffer still
// shared when its checkpoint is dropped is not handed to the next snapshot.
TEST(StateStorage, SharedCheckpointBytesOutliveTheCheckpointAndAreNeverReused) {
  StateShape shape{2, 6, 3, 2, 4};
  auto st = std::move(StateStorage::Create(shape, 2)).value();
  st->Conv(0, 0)[1] = 7.0f;
  std::shared_ptr<const void> kept;
  const float* shared = nullptr;
  {
    StateCheckpoint a = st->Snapshot(0);
    kept = a.Share();
    shared = a.data().data();
    EXPECT_NE(kept, nullptr);
  }
  st->Conv(0, 0)[1] = -1.0f;
  StateCheckpoint b = st->Snapshot(0);
  EXPECT_NE(b.data().data(), shared);  // not the shared buffer
  EXPECT_EQ(shared[1], 7.0f);          // still the dropped checkpoint's bytes
  EXPECT_EQ(b.data()[1], -1.0f);
  kept.reset();
  EXPECT_EQ(StateCheckpoint().Share(), nullptr);  // an empty checkpoint shares nothing
}

// A dropped checkpoint's buffer is reused by the next snapshot (no fresh allocation), and the reused buffer holds
// exactly the new slot's bytes; a checkpoint that outlives its storage stays valid.
TEST(StateStorage, SnapshotsReuseTheBuffersOfDroppedCheckpoints) {
  StateShape shape{2, 6, 3, 2, 4};
  auto st = std::move(StateStorage::Create(shape, 2)).value();
  st->Conv(0, 0)[1] = 7.0f;
  st->Delta(1, 1)[3] = -9.0f;
  const float* first = nullptr;
  {
    StateCheckpoint a = st->Snapshot(0);
    first = a.data().data();
    StateCheckpoint moved = std::move(a);  // moving does not give the buffer back
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(moved.data().data(), first);
  }
  StateCheckpoint b = st->Snapshot(1);
  EXPECT_EQ(b.data().data(), first);
  EXPECT_EQ(std::memcmp(b.data().data(), st->SlotData(1).data(), shape.bytes_per_state()), 0);
  StateCheckpoint c = st->Snapshot(0);
  EXPECT_NE(c.data().data(), first);
  c = st->Snapshot(1);  // assigning over a checkpoint gives its old buffer back
  EXPECT_EQ(std::memcmp(c.data().data(), st->SlotData(1).data(), shape.bytes_per_state()), 0);
  st.reset();
  EXPECT_EQ(b.data()[shape.conv_floats() + shape.layer_floats() + 3], -9.0f);
}

// Waits (bounded) until the storage's background filler has n spare buffers ready.
bool WaitForSpares(const StateStorage& st, size_t n) {
  for (int i = 0; i < 2000 && st.spare_buffers() < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return st.spare_buffers() >= n;
}

// KeepSpares: the filler makes n buffers ready before they are asked for; snapshots take them (new buffers, each
// holding exactly its slot's bytes) and the filler makes more; the storage stops its filler when destroyed while
// checkpoints it made live on.
TEST(StateStorage, KeepSparesReadiesBuffersAheadOfSnapshots) {
  StateShape shape{2, 6, 3, 2, 4};
  auto st = std::move(StateStorage::Create(shape, 2)).value();
  EXPECT_EQ(st->spare_buffers(), 0u);
  st->KeepSpares(3);
  ASSERT_TRUE(WaitForSpares(*st, 3)) << "the filler made " << st->spare_buffers() << " of 3 buffers";
  st->Delta(1, 0)[2] = 4.0f;
  std::vector<StateCheckpoint> held;
  std::set<const float*> buffers;
  for (int i = 0; i < 5; ++i) {
    held.push_back(st->Snapshot(i % 2));
    buffers.insert(held.back().data().data());
    EXPECT_EQ(std::memcmp(held.back().data().data(), st->SlotData(i % 2).data(), shape.bytes_per_state()), 0);
  }
  EXPECT_EQ(buffers.size(), 5u);  // live checkpoints never share a buffer
  ASSERT_TRUE(WaitForSpares(*st, 3));
  EXPECT_LE(st->spare_buffers(), 3u);
  st.reset();
  EXPECT_EQ(held[1].data()[shape.conv_floats() + 2], 4.0f);
}

}  // namespace
}  // namespace rw::model
