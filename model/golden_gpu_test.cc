// Golden conformance on the GPU (docs/gpu.md): the tiny qwen35, qwen35moe and qwen3next models against llama.cpp's
// logits with --device vulkan0 (lavapipe in CI), within the CPU's tolerances (docs/conformance.md); the GPU
// forward's logits and states do not depend on the batch shape, nor on how the device splits its dispatches.
// Skips with a message where no Vulkan device exists.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "gguf/writer.h"
#include "gpu/device.h"
#if REWIND_HAVE_VULKAN
#include "gpu/vk_context.h"  // Context::LimitForTesting
#endif
#include "model/conformance.h"
#include "model/forward.h"
#include "model/golden_gpu_testing.h"

namespace rw::model {
namespace {

// HaveDevice, LoadOnVulkan0, LoadQ8OnVulkan0: model/golden_gpu_testing.h.

TEST(GoldenGpu, TinyQwenModelsMatchLlamaCppOnVulkan0) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  int ran = 0;
  // (Q8_0 runs in the tests below and in engine/exact_test.cc; its matmul is checked bitwise in gpu_tests.)
  // The two -kv- references are llama.cpp's with quantised KV caches (Q8_0, Q4_0: Hadamard rotations, the
  // blocks dequantised in the attention kernels).
  for (const char* model : {"tiny-qwen35-f32", "tiny-qwen35-q4_k_m", "tiny-qwen35moe-f32", "tiny-qwen3next-f32",
                            "tiny-qwen35-f32-kv-q8_0", "tiny-qwen35-f32-kv-q4_0"}) {
    ConformanceOptions opt;
    opt.dir = std::string(REWIND_TEST_DATA) + "/golden";
    opt.model_filter = model;
    opt.case_filter = "chat_multiturn";
    opt.device = 0;
    opt.greedy_steps = 6;  // lavapipe runs shaders on the CPU: a few decode steps keep CI short
    auto res = RunConformance(opt, [](const CaseResult& r) { std::printf("%s\n", FormatCase(r).c_str()); });
    ASSERT_TRUE(res.ok()) << model << ": " << res.error().ToString();
    for (const auto& m : *res) {
      std::printf("%s\n", FormatModel(m).c_str());
      EXPECT_FALSE(m.skipped) << m.model << ": " << m.skip_reason;
      EXPECT_TRUE(m.pass) << m.model << ": " << m.why;
      EXPECT_EQ(m.cases.size(), 1u);
      ++ran;
    }
  }
  EXPECT_EQ(ran, 6);
}

TEST(GoldenGpu, OtherArchitecturesSayTheGpuDoesNotSupportThemYet) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  for (const char* file : {"tiny-lfm2-f32.gguf", "tiny-nemotron-h-f32.gguf", "tiny-kimi-linear-f32.gguf",
                           "tiny-granite-h-moe-f32.gguf"}) {
    LoadOptions lo;
    lo.device = 0;
    auto m = Model::Load(std::string(REWIND_TEST_DATA) + "/golden/models/" + file, lo);
    ASSERT_FALSE(m.ok()) << file;
    EXPECT_EQ(m.error().kind, ErrorKind::kUnsupported);
    EXPECT_NE(m.error().message.find("GPU backend does not support"), std::string::npos) << m.error().message;
  }
}

TEST(GoldenGpu, PartialOffloadIsAClearError) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  LoadOptions lo;
  lo.device = 0;
  lo.n_gpu_layers = 1;
  auto m = Model::Load(std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-q8_0.gguf", lo);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("partial offload is not supported yet"), std::string::npos) << m.error().message;
}

// I1 on the device: the logits of the last token and the final states are the same bits whether the prompt runs
// as one batch, token by token, or in chunks next to another sequence; on the MoE models a token's experts are
// multiplied beside whichever other tokens the batch routes to them.
class GoldenGpuShapes : public ::testing::TestWithParam<const char*> {};

// One prompt through the model in chunks of `split` (beside another sequence in the first chunk when
// with_other): the last token's logits and every recurrent layer's state.
void RunShaped(Model& m, const std::vector<int32_t>& toks, int split, bool with_other, std::vector<float>* logits,
               std::vector<float>* state) {
  const int32_t T = static_cast<int32_t>(toks.size());
  auto kv = KvStorage::Create(m.MakeKvConfig((T + 15) / 16 + 4, 16));
  auto st = StateStorage::Create(m.MakeStateShape(), 2);
  ASSERT_TRUE(kv.ok() && st.ok());
  std::vector<int32_t> pages, other_pages;
  for (int32_t i = 0; i < (T + 15) / 16; ++i) pages.push_back(i);
  other_pages = {static_cast<int32_t>(pages.size())};
  const std::vector<int32_t> other = {5, 6, 7};
  ForwardOutput out;
  for (int32_t p = 0; p < T; p += split) {
    const int32_t n = std::min(split, T - p);
    std::vector<BatchSeq> b(1);
    b[0].state_in = p == 0 ? -1 : 0;
    b[0].state_out = 0;
    b[0].pages = pages;
    b[0].pos0 = p;
    b[0].tokens = std::span<const int32_t>(toks).subspan(p, n);
    if (with_other && p == 0) {
      BatchSeq o;
      o.state_in = -1;
      o.state_out = 1;
      o.pages = other_pages;
      o.tokens = other;
      b.insert(b.begin(), o);
    }
    ASSERT_TRUE(m.Forward(b, **kv, **st, &out).ok());
  }
  const int32_t row = out.seq_first_row.back();
  *logits = std::vector<float>(out.Row(row).begin(), out.Row(row).end());
  const StateShape sh = m.MakeStateShape();
  state->clear();
  const StateStorage& cst = **st;  // the const view reads a device-resident slot
  for (int32_t gi = 0; gi < sh.n_layers; ++gi)
    state->insert(state->end(), cst.Delta(0, gi), cst.Delta(0, gi) + sh.n_heads * sh.head_dim * sh.head_dim);
}

TEST_P(GoldenGpuShapes, LogitsAndStatesDoNotDependOnTheBatchShape) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadOnVulkan0(GetParam());
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  EXPECT_EQ(m.device_name(), "vulkan0");
  auto devs = gpu::ListDevices();
  ASSERT_TRUE(devs.ok() && !devs->empty());
  EXPECT_EQ(m.device_type(), (*devs)[0].type);  // what /metrics' rewind_device_info says
  EXPECT_EQ(m.device_memory_total(), (*devs)[0].memory_bytes);
  EXPECT_GT(m.device_bytes(), 0u);
  const std::vector<int32_t> toks = {11, 42, 7, 300, 5, 99, 123, 8, 64};
  std::vector<float> l1, s1, l2, s2, l3, s3;
  RunShaped(m, toks, 9, false, &l1, &s1);
  RunShaped(m, toks, 1, false, &l2, &s2);
  RunShaped(m, toks, 4, true, &l3, &s3);
  ASSERT_EQ(l1.size(), l2.size());
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), 4 * l1.size())) << "one batch vs token by token";
  EXPECT_EQ(0, std::memcmp(l1.data(), l3.data(), 4 * l1.size())) << "one batch vs chunks of 4 beside another sequence";
  EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), 4 * s1.size()));
  EXPECT_EQ(0, std::memcmp(s1.data(), s3.data(), 4 * s1.size()));
}

INSTANTIATE_TEST_SUITE_P(Models, GoldenGpuShapes,
                         ::testing::Values("tiny-qwen35-q8_0.gguf", "tiny-qwen35moe-f32.gguf", "tiny-qwen3next-f32.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& i) {
                           std::string n = i.param;
                           n = n.substr(5, n.find('.') - 5);
                           for (char& c : n) if (c == '-') c = '_';
                           return n;
                         });

#if REWIND_HAVE_VULKAN
// The device limits (gpu/seq_ops.h): a 260-token prompt with at most 64 workgroups per dimension (every long
// dispatch folded), a loop budget of 13,000 iterations (1 or 2 attention blocks and 191 delta-rule tokens per
// dispatch) and a storage buffer range of 1 MiB (the 2 MB token_embd / output matrices in parts) gives the bits of
// the device's own limits. (The MoE model: its shaders are a superset of qwen35's.)
TEST(GoldenGpu, DispatchFoldsAndLoopSplitsDoNotChangeABit) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadOnVulkan0("tiny-qwen35moe-f32.gguf");
  ASSERT_TRUE(loaded);
  auto ctx = gpu::OpenDevice(0);  // the model's context (one per device per process)
  ASSERT_TRUE(ctx.ok());
  std::vector<int32_t> toks(260);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 37 + 11) % 3000);
  std::vector<float> l1, s1, l2, s2;
  RunShaped(*loaded, toks, 260, true, &l1, &s1);
  (*ctx)->LimitForTesting(64, 13000, 1 << 20);
  std::unique_ptr<Model> limited = LoadOnVulkan0("tiny-qwen35moe-f32.gguf");
  ASSERT_TRUE(limited);
  RunShaped(*limited, toks, 260, true, &l2, &s2);
  (*ctx)->LimitForTesting(0, 0);
  ASSERT_EQ(l1.size(), l2.size());
  EXPECT_EQ(0, std::memcmp(l1.data(), l2.data(), 4 * l1.size()));
  EXPECT_EQ(0, std::memcmp(s1.data(), s2.data(), 4 * s1.size()));
}

// The attention kernels (gpu/seq_ops.h AttentionKernel, forced with REWIND_GPU_ATTENTION): the serial, the
// parallel and the group one give the same logits and states, bit for bit, over a 200-token prompt in chunks of 50 beside
// another sequence and over 20 tokens decoded one by one. A bad value of the switch fails the load.
TEST(GoldenGpu, TheAttentionKernelsGiveTheSameBits) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::vector<int32_t> toks(200);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 53 + 7) % 3000);
  const std::vector<int32_t> dec(toks.begin(), toks.begin() + 20);
  std::vector<float> l[3], s[3], dl[3], ds[3];
  const char* kernels[3] = {"serial", "parallel", "group"};
  for (int k = 0; k < 3; ++k) {
    auto m = LoadQ8WithSwitch("REWIND_GPU_ATTENTION", kernels[k]);
    ASSERT_TRUE(m.ok()) << m.error().message;
    RunShaped(**m, toks, 50, true, &l[k], &s[k]);
    RunShaped(**m, dec, 1, false, &dl[k], &ds[k]);
  }
  for (int k = 1; k < 3; ++k) {
    ASSERT_EQ(l[0].size(), l[k].size());
    EXPECT_EQ(0, std::memcmp(l[0].data(), l[k].data(), 4 * l[0].size())) << kernels[k] << " prefill logits";
    EXPECT_EQ(0, std::memcmp(s[0].data(), s[k].data(), 4 * s[0].size())) << kernels[k] << " prefill states";
    EXPECT_EQ(0, std::memcmp(dl[0].data(), dl[k].data(), 4 * dl[0].size())) << kernels[k] << " decode logits";
    EXPECT_EQ(0, std::memcmp(ds[0].data(), ds[k].data(), 4 * ds[0].size())) << kernels[k] << " decode states";
  }
  auto bad = LoadQ8WithSwitch("REWIND_GPU_ATTENTION", "fastest");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown attention kernel"), std::string::npos) << bad.error().message;
}

// A row's key spans on workgroups of their own, folded by the combine kernel (REWIND_GPU_ATTENTION_SPLIT=1; what
// kAuto does for decode and verify rows on a GPU), or folded by one workgroup as it goes (=0): the same logits and
// states, bit for bit, over a 300-token prompt (two spans of 256 keys) in verify-sized chunks of 10. A bad value of
// the switch fails the load.
TEST(GoldenGpu, SplittingTheAttentionSpansChangesNoBit) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::vector<int32_t> toks(300);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 71 + 3) % 3000);
  std::vector<float> l[2], s[2];
  for (int k = 0; k < 2; ++k) {
    auto m = LoadQ8WithSwitch("REWIND_GPU_ATTENTION_SPLIT", k == 0 ? "0" : "1");
    ASSERT_TRUE(m.ok()) << m.error().message;
    RunShaped(**m, toks, 10, false, &l[k], &s[k]);
  }
  ASSERT_EQ(l[0].size(), l[1].size());
  EXPECT_EQ(0, std::memcmp(l[0].data(), l[1].data(), 4 * l[0].size())) << "logits";
  EXPECT_EQ(0, std::memcmp(s[0].data(), s[1].data(), 4 * s[0].size())) << "states";
  auto bad = LoadQ8WithSwitch("REWIND_GPU_ATTENTION_SPLIT", "yes");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("unknown attention split"), std::string::npos) << bad.error().message;
}
#endif  // REWIND_HAVE_VULKAN

// qwen3next files converted before llama.cpp split the fused projection carry ssm_in (Hk groups of q S, k S,
// v r·S, z r·S rows) instead of attn_qkv + attn_gate: the same rows in another order. The tiny file rewritten
// that way gives the split file's logits and states bit for bit, on the device (gdn_split.comp) and on the CPU
// (kernels::SplitQkvzRow).
TEST(GoldenGpu, Qwen3NextWithTheLegacyFusedSsmInGivesTheSplitFilesBits) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  const std::string src_path = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen3next-f32.gguf";
  auto src = gguf::File::Open(src_path);
  ASSERT_TRUE(src.ok());
  std::unique_ptr<Model> split = LoadOnVulkan0("tiny-qwen3next-f32.gguf");
  ASSERT_TRUE(split);
  const ModelConfig& c = split->config();
  const int64_t E = c.n_embd, S = c.ssm_state, Hk = c.ssm_group, r = c.ssm_heads / c.ssm_group, Kd = Hk * S;
  gguf::Writer w;
  for (const auto& [key, value] : (*src)->metadata()) w.Set(key, value);
  auto is = [](const std::string& name, const char* suffix) {
    return name.size() > std::strlen(suffix) && name.compare(name.size() - std::strlen(suffix), std::string::npos, suffix) == 0;
  };
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    if (is(t.name, ".attn_gate.weight")) continue;
    if (is(t.name, ".attn_qkv.weight")) {
      const std::string blk = t.name.substr(0, t.name.size() - std::strlen("attn_qkv.weight"));
      ASSERT_TRUE(w.AddTensor(blk + "ssm_in.weight", gguf::TensorType::kF32, {E, 2 * Kd + 2 * Hk * r * S}).ok());
    } else {
      ASSERT_TRUE(w.AddTensor(t.name, t.type, std::span<const int64_t>(t.ne, t.n_dims)).ok());
    }
  }
  const std::string dir = std::filesystem::temp_directory_path() / ("rewind-legacy-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string legacy_path = dir + "/tiny-qwen3next-legacy.gguf";
  ASSERT_TRUE(w.Open(legacy_path).ok());
  for (const gguf::TensorInfo& t : (*src)->tensors()) {
    if (is(t.name, ".attn_gate.weight")) continue;
    if (!is(t.name, ".attn_qkv.weight")) {
      ASSERT_TRUE(w.WriteTensor(t.name, t.data, t.nbytes).ok());
      continue;
    }
    const std::string blk = t.name.substr(0, t.name.size() - std::strlen("attn_qkv.weight"));
    const float* qkv = reinterpret_cast<const float*>(t.data);
    const float* gate = reinterpret_cast<const float*>((*src)->FindTensor(blk + "attn_gate.weight")->data);
    std::vector<float> in;
    auto rows = [&](const float* m, int64_t first, int64_t n) { in.insert(in.end(), m + first * E, m + (first + n) * E); };
    for (int64_t g = 0; g < Hk; ++g) {
      rows(qkv, g * S, S);
      rows(qkv, Kd + g * S, S);
      rows(qkv, 2 * Kd + g * r * S, r * S);
      rows(gate, g * r * S, r * S);
    }
    ASSERT_TRUE(w.WriteTensor(blk + "ssm_in.weight", in.data(), 4 * in.size()).ok());
  }
  ASSERT_TRUE(w.Close().ok());
  LoadOptions lo;
  lo.device = 0;
  auto legacy = Model::Load(legacy_path, lo);
  ASSERT_TRUE(legacy.ok()) << legacy.error().message;
  ASSERT_TRUE((*legacy)->weights().layers[0].gdn.legacy_in);
  EXPECT_EQ((*legacy)->device_name(), "vulkan0");
  lo.device = -1;
  auto legacy_cpu = Model::Load(legacy_path, lo);
  auto split_cpu = Model::Load(src_path, lo);
  ASSERT_TRUE(legacy_cpu.ok() && split_cpu.ok());
  const std::vector<int32_t> toks = {11, 42, 7, 300, 5, 99, 123, 8, 64};
  std::vector<float> l1, s1, l2, s2, l3, s3, l4, s4;
  RunShaped(*split, toks, 9, false, &l1, &s1);
  RunShaped(**legacy, toks, 9, false, &l2, &s2);
  RunShaped(**split_cpu, toks, 9, false, &l3, &s3);
  RunShaped(**legacy_cpu, toks, 9, false, &l4, &s4);
  EXPECT_EQ(l1, l2) << "vulkan0";
  EXPECT_EQ(s1, s2) << "vulkan0";
  EXPECT_EQ(l3, l4) << "cpu";
  EXPECT_EQ(s3, s4) << "cpu";
  std::filesystem::remove_all(dir);
}

// Rollback on the device: the state rebuilt from the replay log after k of a batch's tokens, and a forward that
// fuses that rollback (BatchSeq::prefix), give the bits of running the first k tokens directly.
// The GPU context places a barrier only before a dispatch that touches what an earlier one wrote, trusting each
// shader's read-only declarations (gpu/hazards.h). With REWIND_GPU_VERIFY_READONLY=1 every dispatch runs alone and
// the bytes of its read-only bindings are compared before and after (a difference ends the process naming the
// shader): prefill in chunks with replay logs, decode, a replayed rollback and a fused prefix, on every tiny
// Qwen file's architecture and weight types.
TEST(GoldenGpu, NoShaderWritesABindingItDeclaresReadOnly) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  const char* set = std::getenv("REWIND_GPU_VERIFY_READONLY");
  ASSERT_EQ(0, setenv("REWIND_GPU_VERIFY_READONLY", "1", 1));
  for (const char* file : {"tiny-qwen35-q8_0.gguf", "tiny-qwen35-q4_k_m.gguf", "tiny-qwen35-f32.gguf",
                           "tiny-qwen35moe-f32.gguf", "tiny-qwen3next-f32.gguf"}) {
    SCOPED_TRACE(file);
    std::unique_ptr<Model> loaded = LoadOnVulkan0(file);
    ASSERT_TRUE(loaded);
    Model& m = *loaded;
    std::vector<int32_t> toks;
    for (int i = 0; i < 20; ++i) toks.push_back((i * 37 + 5) % 200 + 1);
    auto kv = KvStorage::Create(m.MakeKvConfig(4, 16));
    auto st = StateStorage::Create(m.MakeStateShape(), 4);
    ASSERT_TRUE(kv.ok() && st.ok());
    const std::vector<int32_t> pages = {0, 1};
    ReplayLog log;
    ForwardOutput out;
    for (int32_t p = 0; p < 20; p += 7) {  // chunks of 7, 7, 6, the last with a replay log and all logits
      BatchSeq b;
      b.state_in = p == 0 ? -1 : 0;
      b.state_out = p + 7 < 20 ? 0 : 1;
      b.pages = pages;
      b.pos0 = p;
      b.tokens = std::span<const int32_t>(toks).subspan(p, std::min(7, 20 - p));
      b.all_logits = p + 7 >= 20;
      ForwardOptions fo;
      if (p + 7 >= 20) fo.replay = &log;
      ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out, fo).ok());
    }
    ASSERT_TRUE(m.ReplayState(0, 2, log.seqs[0], 3, **st).ok());
    BatchSeq f;  // from slot 0 with the first 2 logged rows as a prefix, then one token (a rollback's fused path)
    f.state_in = 0;
    f.state_out = 3;
    f.pages = pages;
    f.pos0 = 16;
    f.tokens = std::span<const int32_t>(toks).subspan(16, 1);
    f.prefix = &log.seqs[0];
    f.prefix_rows = 2;
    ASSERT_TRUE(m.Forward({&f, 1}, **kv, **st, &out).ok());
    BatchSeq d;  // a decode step
    d.state_in = 1;
    d.state_out = 1;
    d.pages = pages;
    d.pos0 = 20;
    d.tokens = std::span<const int32_t>(toks).first(1);
    ForwardOptions top;
    top.top_k = 5;
    ASSERT_TRUE(m.Forward({&d, 1}, **kv, **st, &out, top).ok());
  }
  if (set != nullptr) {
    setenv("REWIND_GPU_VERIFY_READONLY", set, 1);
  } else {
    unsetenv("REWIND_GPU_VERIFY_READONLY");
  }
}

TEST(GoldenGpu, ReplayLogRollbackGivesTheForwardsBits) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  const std::vector<int32_t> toks = {3, 17, 250, 9, 41, 77}, next = {88};
  const int32_t k = 4;
  auto kv = KvStorage::Create(m.MakeKvConfig(4, 16, KvType::kF32));
  auto st = StateStorage::Create(m.MakeStateShape(), 4);
  ASSERT_TRUE(kv.ok() && st.ok());
  const std::vector<int32_t> pages = {0};
  const StateShape sh = m.MakeStateShape();
  const size_t nd = static_cast<size_t>(sh.n_heads) * sh.head_dim * sh.head_dim;
  const StateStorage& cst = **st;  // the const view reads a device-resident slot
  auto delta = [&](int32_t slot) { return std::vector<float>(cst.Delta(slot, 0), cst.Delta(slot, 0) + nd); };
  // Slot 0: the zero state kept; slot 1: after all tokens, with the replay log; slot 2: after the first k.
  BatchSeq b;
  b.state_in = -1;
  b.state_out = 0;
  b.pages = pages;
  b.tokens = std::span<const int32_t>(toks).first(1);
  ForwardOutput out;
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out).ok());  // slot 0: after token 0
  ReplayLog log;
  b.state_in = 0;
  b.state_out = 1;
  b.pos0 = 1;
  b.tokens = std::span<const int32_t>(toks).subspan(1);
  ForwardOptions fo;
  fo.replay = &log;
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out, fo).ok());
  ASSERT_EQ(log.seqs.size(), 1u);
  b.state_out = 2;
  b.tokens = std::span<const int32_t>(toks).subspan(1, k);
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out).ok());
  ASSERT_TRUE(m.ReplayState(0, 3, log.seqs[0], k, **st).ok());
  EXPECT_EQ(delta(2), delta(3)) << "ReplayState vs the forward of the first k tokens";
  // Fused: from slot 0 with the first k logged rows, then one more token; against slot 2 + the same token.
  BatchSeq f;
  f.state_in = 0;
  f.state_out = 3;
  f.pages = pages;
  f.pos0 = 1 + k;
  f.tokens = next;
  f.prefix = &log.seqs[0];
  f.prefix_rows = k;
  ForwardOutput fused, plain;
  ASSERT_TRUE(m.Forward({&f, 1}, **kv, **st, &fused).ok());
  BatchSeq p = f;
  p.state_in = 2;
  p.state_out = 2;
  p.prefix = nullptr;
  p.prefix_rows = 0;
  ASSERT_TRUE(m.Forward({&p, 1}, **kv, **st, &plain).ok());
  EXPECT_EQ(fused.logits, plain.logits);
  EXPECT_EQ(delta(2), delta(3));
}

// Model::device_forward_bytes bounds what forwards hold on the device beyond the weights, KV pages and states
// (the page plan leaves it free: engine/hybrid_cache_device.cc): prefill chunks of two sequences with replay
// logs, logs replaced and made again (the pool's spares), a rollback replayed, a draft verified with all logits.
TEST(GoldenGpu, ForwardBytesBoundWhatForwardsHoldOnTheDevice) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  constexpr int32_t kRows = 48, kOut = 6;
  auto kv = KvStorage::Create(m.MakeKvConfig(16, 16, KvType::kQ8_0));
  auto st = StateStorage::Create(m.MakeStateShape(), 6);
  ASSERT_TRUE(kv.ok() && st.ok());
  ASSERT_TRUE(m.PlaceStorage(**kv, **st).ok());
  const uint64_t placed = m.device_bytes();
  const uint64_t bound = m.device_forward_bytes(kRows, kOut);
  ASSERT_GT(bound, 0u);
  std::vector<int32_t> toks(200);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = static_cast<int32_t>((i * 37 + 11) % 900);
  const std::vector<int32_t> pages_a = {0, 1, 2, 3, 4, 5, 6}, pages_b = {7, 8, 9, 10, 11, 12, 13};
  std::vector<ReplayLog> kept(2);  // the engine keeps a sequence's last log while the next forward runs
  uint64_t peak = 0;
  for (int32_t round = 0; round < 4; ++round) {
    BatchSeq a, b;
    a.state_in = round == 0 ? -1 : 0;
    a.state_out = 0;
    a.pages = pages_a;
    a.pos0 = round * (kRows / 2);
    a.tokens = std::span<const int32_t>(toks).subspan(a.pos0, kRows / 2);
    b = a;
    b.state_in = round == 0 ? -1 : 1;
    b.state_out = 1;
    b.pages = pages_b;
    b.all_logits = round == 3;  // a verify-like step: logits for every row of b (kOut of them at most)
    b.tokens = std::span<const int32_t>(toks).subspan(100 + a.pos0, round == 3 ? kOut - 1 : kRows / 2);
    const BatchSeq batch[] = {a, b};
    ForwardOutput out;
    ForwardOptions fo;
    fo.replay = &kept[round % 2];  // the log of two rounds ago goes back to the pool
    ASSERT_TRUE(m.Forward(batch, **kv, **st, &out, fo).ok());
    peak = std::max(peak, m.device_bytes() - placed);
    if (round == 1) {  // a rollback of sequence a to 5 of the round's tokens, on the device
      ASSERT_TRUE(m.ReplayState(-1, 2, kept[1].seqs[0], 5, **st).ok());
      peak = std::max(peak, m.device_bytes() - placed);
    }
  }
  std::printf("device bytes beyond weights, pages and states: %llu at most; forward_bytes(%d, %d) = %llu\n",
              static_cast<unsigned long long>(peak), kRows, kOut, static_cast<unsigned long long>(bound));
  EXPECT_GT(peak, 0u);
  EXPECT_LE(peak, bound);
}

// The states and KV pages live on the device (model/gpu_storage.h): forwards move no state or KV bytes through
// the host; a checkpoint is one device -> host copy of the slot and a restore one host -> device copy, and a
// restored slot continues with the bits of the slot it was taken from; KV pages read to the host and written
// back elsewhere (what persistence does) are attended to with the same bits. An f16 cache: the packed path.
TEST(GoldenGpu, StatesAndKvStayOnTheDeviceAndCheckpointsRoundTripBitForBit) {
  std::string why;
  if (!HaveDevice(&why)) GTEST_SKIP() << "no Vulkan device: " << why;
  std::unique_ptr<Model> loaded = LoadQ8OnVulkan0();
  ASSERT_TRUE(loaded);
  Model& m = *loaded;
  auto kv = KvStorage::Create(m.MakeKvConfig(4, 16, KvType::kF16));
  auto st = StateStorage::Create(m.MakeStateShape(), 3);
  ASSERT_TRUE(kv.ok() && st.ok());
  const StateStorage& cst = **st;
  const KvStorage& ckv = **kv;
  const std::vector<int32_t> pages = {0}, toks = {3, 17, 250, 9, 41}, next = {77}, more = {5};
  BatchSeq b;
  b.state_in = -1;
  b.state_out = 0;
  b.pages = pages;
  b.tokens = toks;
  ForwardOutput out;
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out).ok());
  b.state_in = 0;
  b.pos0 = 5;
  b.tokens = next;
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out).ok());
  StateDevice* dev = cst.device();
  KvDevice* kdev = ckv.device();
  ASSERT_NE(dev, nullptr) << "the GPU forward keeps the states on the device";
  ASSERT_NE(kdev, nullptr) << "the GPU forward keeps the KV pages on the device";
  EXPECT_EQ(dev->bytes_to_host(), 0u) << "a forward downloaded state bytes";
  EXPECT_EQ(dev->bytes_to_device(), 0u) << "a forward uploaded state bytes";
  EXPECT_EQ(kdev->bytes_to_host(), 0u) << "a forward downloaded KV bytes";
  EXPECT_EQ(kdev->bytes_to_device(), 0u) << "a forward uploaded KV bytes";
  // Page 0 (6 rows) copied through the host into page 1, as an export and an import do.
  const int32_t n_attn = ckv.config().n_layers;
  for (int32_t l = 0; l < n_attn; ++l) {
    const std::vector<uint8_t> k(ckv.K(l, 0), ckv.K(l, 0) + 6 * ckv.k_row_bytes());
    const std::vector<uint8_t> v(ckv.V(l, 0), ckv.V(l, 0) + 6 * ckv.v_row_bytes());
    EXPECT_TRUE(std::any_of(k.begin(), k.end(), [](uint8_t x) { return x != 0; })) << "layer " << l;
    ASSERT_TRUE((*kv)->WriteRows(l, 1, 0, 6, k.data(), v.data()).ok());
  }
  EXPECT_EQ(kdev->bytes_to_device(), static_cast<uint64_t>(n_attn) * 6 * (ckv.k_row_bytes() + ckv.v_row_bytes()));
  const uint64_t bytes = cst.bytes_per_state();
  StateCheckpoint ck = cst.Snapshot(0);
  EXPECT_EQ(dev->bytes_to_host(), bytes);
  const std::span<const float> staged = cst.SlotData(0);
  ASSERT_EQ(ck.data().size(), staged.size());
  EXPECT_EQ(std::memcmp(ck.data().data(), staged.data(), ck.bytes()), 0);
  // Slot 0 goes on; the checkpoint restored into slot 1 and a device copy into slot 2 go on with the same token.
  b.pos0 = 6;
  b.tokens = more;
  ForwardOutput a0, a1, a2;
  (*st)->CopySlot(0, 2);
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &a0).ok());
  const uint64_t to_dev = dev->bytes_to_device();
  ASSERT_TRUE((*st)->Restore(ck, 1).ok());
  EXPECT_EQ(dev->bytes_to_device(), to_dev + bytes);
  b.state_in = 1;
  b.state_out = 1;
  const std::vector<int32_t> copied = {1};
  b.pages = copied;  // the restored slot attends to the rows copied through the host
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &a1).ok());
  b.pages = pages;
  b.state_in = 2;
  b.state_out = 2;
  ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &a2).ok());
  EXPECT_EQ(a0.logits, a1.logits);
  EXPECT_EQ(a0.logits, a2.logits);
  const std::vector<float> s0(cst.SlotData(0).begin(), cst.SlotData(0).end());
  const std::vector<float> s1(cst.SlotData(1).begin(), cst.SlotData(1).end());
  const std::vector<float> s2(cst.SlotData(2).begin(), cst.SlotData(2).end());
  EXPECT_EQ(s0, s1);
  EXPECT_EQ(s0, s2);
  EXPECT_NE(std::vector<float>(ck.data().begin(), ck.data().end()), s0) << "the token changed the state";
}

// The q8_0 tiny model's storages on its device: four f32 KV pages of 16 tokens and `slots` state slots, with
// the prompt {3, 17, 250} evaluated from the zero state into slot 0 (b: that batch, for the test to go on with;
// null storages after a failed expectation).

}  // namespace
}  // namespace rw::model
