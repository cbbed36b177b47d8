#include "memory/placement.h"

#include <gtest/gtest.h>

namespace rw::memory {
namespace {

TEST(Placement, SnapshotsMessageStartsGenerationHeaderBranchesAndRequests) {
  std::vector<int32_t> starts = {0, 40, 90};
  std::vector<int32_t> branches = {55};
  std::vector<int32_t> requested = {70, 500};
  PlacementInput in;
  in.prompt_size = 120;
  in.message_starts = starts;
  in.generation_header = 115;
  in.branch_points = branches;
  in.requested = requested;
  EXPECT_EQ(PlaceCheckpoints(in), (std::vector<int32_t>{40, 55, 70, 90, 115}));
}

TEST(Placement, IntervalRestartsAtEveryMessageStart) {
  std::vector<int32_t> starts = {0, 100};
  PlacementInput in;
  in.prompt_size = 260;
  in.message_starts = starts;
  in.interval = 32;
  EXPECT_EQ(PlaceCheckpoints(in), (std::vector<int32_t>{32, 64, 96, 100, 132, 164, 196, 228}));
}

TEST(Placement, OnlyPositionsAfterTheResumePointAndBeforeThePromptEnd) {
  std::vector<int32_t> starts = {0, 10, 20, 30};
  std::vector<int32_t> requested = {-5, 30, 31};
  PlacementInput in;
  in.prompt_size = 30;
  in.resume_pos = 10;
  in.message_starts = starts;
  in.requested = requested;
  EXPECT_EQ(PlaceCheckpoints(in), (std::vector<int32_t>{20}));
}

TEST(Placement, ChunksEndAtEveryCheckpointAndAreAtMostMaxChunk) {
  std::vector<int32_t> ck = {5, 12, 13};
  EXPECT_EQ(ChunkEnds(2, 30, ck, 8), (std::vector<int32_t>{5, 12, 13, 21, 29, 30}));
  EXPECT_EQ(ChunkEnds(30, 30, ck, 8), (std::vector<int32_t>{}));
  EXPECT_EQ(ChunkEnds(0, 3, {}, 512), (std::vector<int32_t>{3}));
}

TEST(Placement, PlanCombinesPositionsAndChunks) {
  std::vector<int32_t> starts = {0, 6};
  PlacementInput in;
  in.prompt_size = 16;
  in.message_starts = starts;
  in.generation_header = 14;
  in.interval = 4;
  in.max_chunk = 5;
  Placement p = PlanPlacement(in);
  EXPECT_EQ(p.checkpoints, (std::vector<int32_t>{4, 6, 10, 14}));
  EXPECT_EQ(p.chunk_ends, (std::vector<int32_t>{4, 6, 10, 14, 16}));
}

}  // namespace
}  // namespace rw::memory
