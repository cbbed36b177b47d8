// The quantisation presets a user downloads, on the GPU: `make-model` files whose tensors use the types
// llama.cpp's quantiser falls back to on narrow rows (a Q4_K_M of a small shape is mostly Q5_0, a Q5_K_M mostly
// Q5_1; Q4_1 is a preset of its own) load on vulkan0, agree with the CPU token by token within rounding, and
// give the same bits whatever the batch shape. Skips with a message where no Vulkan device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <cstring>
#include <map>
#include <string>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gpu/device.h"
#include "model/forward.h"
#include "modelgen/make_model.h"

namespace rw::model {
namespace {

// Each prefix's next-token logits, one token per forward (teacher forced).
std::vector<std::vector<float>> StepLogits(Model& m, const std::vector<int32_t>& toks, int split) {
  const int32_t T = static_cast<int32_t>(toks.size());
  auto kv = KvStorage::Create(m.MakeKvConfig((T + 15) / 16 + 1, 16));
  auto st = StateStorage::Create(m.MakeStateShape(), 1);
  EXPECT_TRUE(kv.ok() && st.ok());
  std::vector<int32_t> pages;
  for (int32_t i = 0; i < (T + 15) / 16; ++i) pages.push_back(i);
  std::vector<std::vector<float>> rows;
  ForwardOutput out;
  for (int32_t p = 0; p < T; p += split) {
    const int32_t n = std::min(split, T - p);
    std::vector<BatchSeq> b(1);
    b[0].state_in = p == 0 ? -1 : 0;
    b[0].state_out = 0;
    b[0].pages = pages;
    b[0].pos0 = p;
    b[0].tokens = std::span<const int32_t>(toks).subspan(p, n);
    b[0].all_logits = true;
    Status s = m.Forward(b, **kv, **st, &out);
    EXPECT_TRUE(s.ok()) << s.error().message;
    if (!s.ok()) return {};
    for (int32_t r = 0; r < n; ++r) {
      auto row = out.Row(out.seq_first_row[0] + r);
      rows.emplace_back(row.begin(), row.end());
    }
  }
  return rows;
}

std::map<std::string, int64_t> TypeCounts(const std::string& path) {
  std::map<std::string, int64_t> n;
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok());
  if (f.ok())
    for (const auto& t : (*f)->tensors()) ++n[gguf::TypeName(t.type)];
  return n;
}

TEST(GpuMakeModel, FallbackQuantTypesRunOnTheDeviceLikeTheCpuAndBatchInvariant) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the Vulkan loader found no device" : devs.error().message);
  const std::string dir = ::testing::TempDir() + "/gpu_make_model_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  auto vocab = gguf::File::Open(std::string(REWIND_TEST_DATA) + "/vocab/tiny-qwen35-vocab.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.error().message;
  struct Case { const char* preset; const char* type; const char* must_have; };
  const Case cases[] = {{"tiny-moe", "q4_k_m", "Q5_0"}, {"tiny-moe", "q5_k_m", "Q5_1"}, {"tiny-next", "q4_1", "Q4_1"}};
  std::vector<int32_t> toks;
  for (int i = 0; i < 40; ++i) toks.push_back((i * 7919 + 13) % 200 + 1);
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.preset) + " " + c.type);
    modelgen::MakeModelOptions opt;
    opt.preset = c.preset;
    opt.file_type = c.type;
    opt.threads = 2;
    const std::string path = dir + "/" + c.preset + "-" + c.type + ".gguf";
    ASSERT_TRUE(modelgen::MakeModel(opt, **vocab, path).ok());
    EXPECT_GT(TypeCounts(path)[c.must_have], 0) << "the file should hold " << c.must_have << " tensors";
    auto cpu = Model::Load(path, LoadOptions{});
    LoadOptions lo;
    lo.device = 0;
    auto gpu = Model::Load(path, lo);
    ASSERT_TRUE(cpu.ok() && gpu.ok()) << (gpu.ok() ? "" : gpu.error().message);
    const auto want = StepLogits(**cpu, toks, 40);
    const auto got = StepLogits(**gpu, toks, 40);
    ASSERT_EQ(want.size(), toks.size());
    ASSERT_EQ(got.size(), toks.size());
    int top1 = 0;
    double max_d = 0, max_mag = 0;
    for (size_t t = 0; t < toks.size(); ++t) {
      top1 += std::max_element(want[t].begin(), want[t].end()) - want[t].begin() ==
              std::max_element(got[t].begin(), got[t].end()) - got[t].begin();
      for (size_t v = 0; v < want[t].size(); ++v) {
        max_d = std::max(max_d, static_cast<double>(std::fabs(want[t][v] - got[t][v])));
        max_mag = std::max(max_mag, static_cast<double>(std::fabs(want[t][v])));
      }
    }
    std::printf("%s %s: top-1 %d/%zu, max|d| %.3g on logits up to %.3g\n", c.preset, c.type, top1, toks.size(),
                max_d, max_mag);
    // Random weights give flat logits, and an int8 activation rounding flip now and then moves a logit by a
    // fraction of its size (docs/gpu.md, Exactness): a wrong block layout moves every one by its whole size.
    EXPECT_GE(top1, 34) << "CPU and vulkan0 disagree on the next token too often";
    EXPECT_LT(max_d, 0.25 * max_mag);
    // I1 on the device: token by token and in chunks of 7 give the one batch's bits.
    for (const int split : {1, 7}) {
      const auto again = StepLogits(**gpu, toks, split);
      ASSERT_EQ(again.size(), got.size());
      for (size_t t = 0; t < got.size(); ++t)
        ASSERT_EQ(0, std::memcmp(again[t].data(), got[t].data(), 4 * got[t].size())) << "split " << split << " t " << t;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rw::model
