// Barriers only where a command depends on an earlier one (gpu/hazards.h): the tracker's rule, the shaders'
// writable bindings read from their SPIR-V, and the device context placing barriers by them; and the context's
// device time by command (profiling).
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gpu/gpu_testing.h"
#include "gpu/hazards.h"
#include "gpu/ops.h"
#include "gpu/vk_context.h"

namespace rw::gpu {
namespace {

bool Rec(HazardTracker& t, std::initializer_list<Access> a) { return t.Record(std::vector<Access>(a)); }

TEST(GpuHazards, OnlyAReadAfterAWriteAWriteAfterAReadOrTwoWritesOfOverlappingBytesNeedABarrier) {
  HazardTracker t;
  EXPECT_FALSE(Rec(t, {{1, 0, 100, false}, {2, 0, 64, true}}));   // read x, write y1
  EXPECT_FALSE(Rec(t, {{1, 0, 100, false}, {3, 0, 64, true}}));   // read x again, write y2: independent
  EXPECT_FALSE(Rec(t, {{2, 64, 128, true}}));                     // bytes of y1 nobody touched yet
  EXPECT_FALSE(Rec(t, {{4, 0, 8, false}, {2, 128, 256, false}}));  // a range ending where y1's write begins is apart
  EXPECT_TRUE(Rec(t, {{2, 32, 40, false}, {5, 0, 4, true}}));     // reads what the first wrote: RAW
  EXPECT_EQ(t.tracked(), 2u) << "the barrier orders everything before it";
  EXPECT_FALSE(Rec(t, {{1, 0, 100, true}}));  // x was read before that barrier only
  EXPECT_TRUE(Rec(t, {{1, 99, 100, true}}));  // a second write of x's last byte: WAW
  EXPECT_FALSE(Rec(t, {{5, 0, 4, false}, {6, 0, 4, true}}));
  EXPECT_TRUE(Rec(t, {{5, 0, 4, true}}));     // writes what a command since the barrier read: WAR
  t.Clear();
  EXPECT_FALSE(Rec(t, {{5, 0, 4, false}})) << "the host waited for everything";
}

TEST(GpuHazards, AFullTrackerOrdersTheNextCommandAnyway) {
  HazardTracker t;
  size_t n = 0;
  for (uint64_t id = 1;; ++id) {
    if (Rec(t, {{id, 0, 4, true}})) break;
    ++n;
  }
  EXPECT_EQ(n, HazardTracker::kMaxTracked);
}

#if REWIND_HAVE_VULKAN
// NonWritable (GLSL readonly) bindings are read-only; every other storage buffer may be written, including one
// bound by several aliases of which one is writable.
TEST(GpuHazards, TheShadersWritableBindingsComeFromTheirSpirv) {
  struct Want { const char* shader; uint32_t mask; uint32_t n; };
  const Want wants[] = {
      {"copy_rows", 0b10, 2},        // src readonly, dst writeonly
      {"eltwise", 0b01, 2},          // a += b
      {"quant_q8_0", 0b110, 3},      // x readonly; q and d written
      {"matmul_q8_0_rows", 0b10000, 5},
      {"kv_scatter", 0b010, 3},      // rows readonly, pool (two aliases) written, table readonly
      {"gdn_delta", 0b011000, 6},    // the state in place and the output
      {"rms_norm", 0b0101, 4},       // x (residual add in place) and o
  };
  for (const Want& w : wants) {
    const ShaderBlob* blob = FindShader(w.shader);
    ASSERT_NE(blob, nullptr) << w.shader;
    EXPECT_EQ(WritableBindings(blob->words, blob->n_words) & ((1u << w.n) - 1), w.mask) << w.shader;
  }
}

// On the device: copies of one source into two outputs run without a barrier between them; the copy that reads
// an output gets one; the results are those of the order recorded. With REWIND_GPU_BARRIERS=all's switch, every
// command gets one.
TEST(GpuHazards, TheContextPlacesBarriersOnlyBeforeDependentCommands) {
  std::string why;
  auto ctx = testing::Device(&why);
  if (!ctx) GTEST_SKIP() << "no Vulkan device: " << why;
  const uint32_t n = 256;
  std::vector<float> x(n);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i) - 3.0f;
  Buffer a = testing::Up(*ctx, x);
  auto b = ctx->Alloc(4 * n), c = ctx->Alloc(4 * n), d = ctx->Alloc(4 * n);
  ASSERT_TRUE(b.ok() && c.ok() && d.ok());
  ASSERT_TRUE(ctx->Submit().ok());
  auto copy = ctx->GetPipeline("copy_rows");
  ASSERT_TRUE(copy.ok());
  struct { uint32_t rows, width, src_off, src_stride, dst_off, dst_stride; } cp{1, n, 0, 0, 0, 0};
  for (const bool all : {false, true}) {
    ctx->SetFullBarriers(all);
    const uint64_t b0 = ctx->barriers(), d0 = ctx->dispatches();
    ctx->Dispatch(**copy, {{&a}, {&*b}}, &cp, sizeof(cp), Groups(n));  // b = a
    ctx->Dispatch(**copy, {{&a}, {&*c}}, &cp, sizeof(cp), Groups(n));  // c = a: no barrier
    ASSERT_TRUE(RecordEltwise(*ctx, *b, *c, 0, 1, n).ok());  // b += c: after both
    ctx->Dispatch(**copy, {{&*b}, {&*d}}, &cp, sizeof(cp), Groups(n));  // d = b
    ctx->Dispatch(**copy, {{&a}, {&*b}}, &cp, sizeof(cp), Groups(n));  // b = a: writes what the last copy read
    const std::vector<float> got_d = testing::Down(*ctx, *d, n), got_b = testing::Down(*ctx, *b, n);
    for (uint32_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_d[i], x[i] + x[i]) << i;
      ASSERT_EQ(got_b[i], x[i]) << i;
    }
    EXPECT_EQ(ctx->dispatches() - d0, 5u);
    // Tracked: none before the first (nothing recorded since the last wait), none before the second, one
    // before each of the other three (read after write, read after write, write after read).
    EXPECT_EQ(ctx->barriers() - b0, all ? 5u : 3u) << (all ? "every command" : "hazards only");
  }
  ctx->SetFullBarriers(false);
}

// Profiling: every command is counted under its shader's name ("fill" for fills), more commands than a frame's
// timestamps go out in more batches, and nothing is counted once it is off.
TEST(GpuProfile, EveryCommandIsTimedUnderItsName) {
  std::string why;
  auto ctx = testing::Device(&why);
  if (!ctx) GTEST_SKIP() << "no Vulkan device: " << why;
  const uint32_t n = 64;
  Buffer a = testing::Up(*ctx, std::vector<float>(n, 1.0f));
  auto b = ctx->Alloc(4 * n);
  ASSERT_TRUE(b.ok());
  auto copy = ctx->GetPipeline("copy_rows");
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE(ctx->SetProfiling(true).ok());
  ctx->TakeProfile();
  struct { uint32_t rows, width, src_off, src_stride, dst_off, dst_stride; } cp{1, n, 0, 0, 0, 0};
  const uint32_t many = 700;  // over one frame's timestamps (Context::kProfileQueries)
  const uint64_t f0 = ctx->flushes();
  ASSERT_TRUE(ctx->Fill(*b, 0).ok());
  for (uint32_t k = 0; k < many; ++k) ASSERT_TRUE(RecordEltwise(*ctx, *b, a, 0, 1, n).ok());  // b += 1
  ctx->Dispatch(**copy, {{&*b}, {&a}}, &cp, sizeof(cp), Groups(n));
  ASSERT_EQ(testing::Down(*ctx, a, n)[n - 1], static_cast<float>(many));
  EXPECT_GE(ctx->flushes() - f0, 2u);
  const std::vector<ProfileRow> rows = ctx->TakeProfile();
  std::map<std::string, ProfileRow> by;
  double total = 0;
  for (const ProfileRow& r : rows) {
    by[r.name] = r;
    total += r.seconds;
    EXPECT_GE(r.seconds, 0.0) << r.name;
  }
  EXPECT_EQ(by["eltwise"].count, many);
  EXPECT_EQ(by["copy_rows"].count, 1u);
  EXPECT_EQ(by["fill"].count, 1u);
  EXPECT_GT(total, 0.0);
  EXPECT_TRUE(ctx->TakeProfile().empty()) << "taken";
  ASSERT_TRUE(ctx->SetProfiling(false).ok());
  ctx->Dispatch(**copy, {{&*b}, {&a}}, &cp, sizeof(cp), Groups(n));
  ASSERT_TRUE(ctx->Submit().ok());
  EXPECT_TRUE(ctx->TakeProfile().empty()) << "off";
}
#endif

}  // namespace
}  // namespace rw::gpu
