// make-model tests: the tiny preset reproduces the fixture layout (keys, types, values, tensor names, shapes,
// types and offsets) of the llama.cpp-made tiny-qwen35 files, output is deterministic, weights follow the
// documented scales, and the demo model is generated once and reused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include "base/file.h"
#include "gguf/describe.h"
#include "gguf/gguf.h"
#include "gguf/quants.h"
#include "modelgen/demo_model.h"
#include "modelgen/make_model.h"
#include "modelgen/rng.h"

namespace rw::modelgen {
namespace {

using ::testing::HasSubstr;

const std::string kVocab = std::string(REWIND_TEST_DATA) + "/vocab/tiny-qwen35-vocab.gguf";

std::string TempPath(const std::string& stem) {
  return ::testing::TempDir() + "/modelgen_test_" + std::to_string(::getpid()) + "_" + stem;
}

std::unique_ptr<gguf::File> OpenOrDie(const std::string& path) {
  auto f = gguf::File::Open(path);
  EXPECT_TRUE(f.ok()) << f.error().message;
  return f.ok() ? std::move(f).value() : nullptr;
}

std::vector<std::string> Lines(const std::string& text, bool drop_free_text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // general.name / general.description are free text that differs by generator.
    if (drop_free_text &&
        (line.rfind("kv general.name ", 0) == 0 || line.rfind("kv general.description ", 0) == 0)) {
      continue;
    }
    out.push_back(line);
  }
  return out;
}

std::string Make(const std::string& type, uint64_t seed = 0, int threads = 2,
                 const std::string& preset = "tiny") {
  auto vocab = OpenOrDie(kVocab);
  const std::string path =
      TempPath(preset + "_" + type + "_" + std::to_string(seed) + "_" + std::to_string(threads) + ".gguf");
  MakeModelOptions opt;
  opt.preset = preset;
  opt.file_type = type;
  opt.seed = seed;
  opt.threads = threads;
  Status s = MakeModel(opt, *vocab, path);
  EXPECT_TRUE(s.ok()) << s.error().message;
  return path;
}

// Golden layouts made with `rewind make-model --describe` from ../shared/fixtures/llama-ref/models.
class TinyLayout : public ::testing::TestWithParam<const char*> {};

TEST_P(TinyLayout, MatchesTheLlamaCppMadeFixture) {
  const std::string type = GetParam();
  auto golden = ReadFileToString(std::string(REWIND_TEST_DATA) + "/gguf/tiny-qwen35-" + type + ".layout.txt");
  ASSERT_TRUE(golden.ok()) << golden.error().message;
  const std::string path = Make(type);
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  const auto want = Lines(*golden, true);
  const auto got = Lines(gguf::DescribeLayout(*f), true);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) EXPECT_EQ(got[i], want[i]) << "line " << i;
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Types, TinyLayout, ::testing::Values("f32", "q8_0", "q4_k_m"));

// The MoE presets against the llama.cpp-made fixtures copied for the golden tests: same keys (and values),
// tensor names, shapes, types and offsets.
struct MoeCase {
  const char* preset;
  const char* fixture;
};
class MoeLayout : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeLayout, MatchesTheLlamaCppMadeFixture) {
  const MoeCase mc = GetParam();
  auto fixture = OpenOrDie(std::string(REWIND_TEST_DATA) + "/golden/models/" + mc.fixture + "-f32.gguf");
  ASSERT_NE(fixture, nullptr);
  const std::string path = Make("f32", 0, 2, mc.preset);
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  const auto want = Lines(gguf::DescribeLayout(*fixture), true);
  const auto got = Lines(gguf::DescribeLayout(*f), true);
  EXPECT_EQ(got.size(), want.size());
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) EXPECT_EQ(got[i], want[i]) << "line " << i;
  std::remove(path.c_str());
}

INSTANTIATE_TEST_SUITE_P(Presets, MoeLayout,
                         ::testing::Values(MoeCase{"tiny-moe", "tiny-qwen35moe"},
                                           MoeCase{"tiny-next", "tiny-qwen3next"}),
                         [](const auto& info) {
                           return std::string(info.param.preset == std::string("tiny-moe") ? "Qwen35Moe"
                                                                                           : "Qwen3Next");
                         });

TEST(MakeModel, TinyHasTheExpectedKeysAndShapes) {
  const std::string path = Make("f32");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(*f->GetString("general.architecture"), "qwen35");
  EXPECT_EQ(*f->GetU32("qwen35.block_count"), 9u);
  EXPECT_EQ(*f->GetU32("qwen35.nextn_predict_layers"), 1u);
  EXPECT_EQ(*f->GetU32("qwen35.embedding_length"), 256u);
  EXPECT_EQ(*f->GetIntArray("qwen35.rope.dimension_sections"), (std::vector<int64_t>{3, 3, 2, 0}));
  EXPECT_EQ(*f->GetString("tokenizer.ggml.pre"), "qwen35");
  EXPECT_EQ(f->GetStringArray("tokenizer.ggml.tokens")->size(), 4000u);
  EXPECT_THAT(*f->GetString("tokenizer.chat_template"), HasSubstr("<|im_start|>"));
  EXPECT_EQ(f->FindTensor("token_embd.weight")->ShapeString(), "{256, 4000}");
  EXPECT_EQ(f->FindTensor("blk.0.attn_qkv.weight")->ShapeString(), "{256, 512}");
  EXPECT_EQ(f->FindTensor("blk.3.attn_q.weight")->ShapeString(), "{256, 512}");
  EXPECT_EQ(f->FindTensor("blk.8.nextn.eh_proj.weight")->ShapeString(), "{512, 256}");
  EXPECT_EQ(f->FindTensor("output.weight"), nullptr);  // tied
  EXPECT_EQ(f->FindTensor("blk.3.attn_qkv.weight"), nullptr);
  std::remove(path.c_str());
}

TEST(MakeModel, IsByteIdenticalAcrossRunsAndThreadCountsAndDependsOnTheSeed) {
  const std::string a = Make("q8_0", 0, 1), b = Make("q8_0", 0, 3), c = Make("q8_0", 7, 2);
  auto ra = ReadFileToString(a), rb = ReadFileToString(b), rc = ReadFileToString(c);
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  EXPECT_TRUE(*ra == *rb);
  EXPECT_FALSE(*ra == *rc);
  for (const auto& p : {a, b, c}) std::remove(p.c_str());
}

TEST(MakeModel, DrawsKQuantBlocksWithTheTensorScalesIndependentOfThreadCount) {
  const std::string a = Make("q4_k_m", 0, 1), b = Make("q4_k_m", 0, 3), ref = Make("f32", 0, 2);
  auto ra = ReadFileToString(a), rb = ReadFileToString(b);
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_TRUE(*ra == *rb) << "same seed, 1 vs 3 threads";
  auto f = OpenOrDie(a), g = OpenOrDie(ref);
  ASSERT_NE(f, nullptr);
  ASSERT_NE(g, nullptr);
  int checked[3] = {0, 0, 0};
  for (const gguf::TensorInfo& t : f->tensors()) {
    const int k = t.type == gguf::TensorType::kQ4_K ? 0 : t.type == gguf::TensorType::kQ5_K ? 1
                : t.type == gguf::TensorType::kQ6_K ? 2 : -1;
    if (k < 0) continue;
    const gguf::TensorInfo* want = g->FindTensor(t.name);
    ASSERT_NE(want, nullptr) << t.name;
    const int64_t n = t.n_elements(), cols = t.ne[0];
    std::vector<float> x(static_cast<size_t>(n));
    const uint64_t rb_bytes = gguf::RowBytes(t.type, cols);
    for (int64_t r = 0; r < n / cols; ++r)
      gguf::DequantizeRow(t.type, t.data + r * rb_bytes, x.data() + r * cols, cols);
    double s = 0, s2 = 0;
    for (float v : x) s += v, s2 += static_cast<double>(v) * v;
    const double mean = s / n, sd = std::sqrt(s2 / n - mean * mean);
    const float* w = reinterpret_cast<const float*>(want->data);
    double ws = 0, ws2 = 0;
    for (int64_t i = 0; i < n; ++i) ws += w[i], ws2 += static_cast<double>(w[i]) * w[i];
    const double wmean = ws / n, wsd = std::sqrt(ws2 / n - wmean * wmean);
    // Two independent samples of the same distribution: their standard deviations differ by ~1/sqrt(n).
    EXPECT_NEAR(sd / wsd, 1.0, 0.03 + 4 / std::sqrt(static_cast<double>(n))) << t.name << " " << gguf::TypeName(t.type);
    EXPECT_NEAR(mean, wmean, 0.02 * wsd + 8 * wsd / std::sqrt(static_cast<double>(n))) << t.name;
    ++checked[k];
  }
  EXPECT_GT(checked[0], 0) << "no Q4_K tensor checked";
  EXPECT_GT(checked[2], 0) << "no Q6_K tensor checked";
  for (const auto& p : {a, b, ref}) std::remove(p.c_str());
}

// Mean and standard deviation of a F32 tensor.
std::pair<double, double> Moments(const gguf::TensorInfo& t) {
  const float* x = reinterpret_cast<const float*>(t.data);
  double s = 0, s2 = 0;
  const int64_t n = t.n_elements();
  for (int64_t i = 0; i < n; ++i) {
    s += x[i];
    s2 += static_cast<double>(x[i]) * x[i];
  }
  const double mean = s / n;
  return {mean, std::sqrt(s2 / n - mean * mean)};
}

TEST(MakeModel, DrawsWeightsWithTheFixtureScales) {
  const std::string path = Make("f32");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  struct Case {
    const char* name;
    double mean, std, tol;
  };
  const Case cases[] = {
      {"token_embd.weight", 0, 1.0, 0.01},
      {"output_norm.weight", 0, 4.0 / 16, 0.05},     // tied: N(0, (4/sqrt(E))^2)
      {"blk.0.attn_qkv.weight", 0, 1.0 / 16, 0.01},  // 1/sqrt(fan_in)
      {"blk.0.ssm_alpha.weight", 0, 0.5 / 16, 0.05},
      {"blk.0.ssm_out.weight", 0, 0.5 / 16, 0.01},  // residual writer 0.5/sqrt(fan_in)
      {"blk.0.ffn_down.weight", 0, 0.5 / 16, 0.01},
      {"blk.0.ssm_conv1d.weight", 0, 0.5, 0.05},
      {"blk.0.attn_norm.weight", 1.0, 0.1, 0.1},
      {"blk.8.nextn.eh_proj.weight", 0, 1.0 / std::sqrt(512.0), 0.01},
  };
  for (const Case& c : cases) {
    const gguf::TensorInfo* t = f->FindTensor(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    auto [mean, std] = Moments(*t);
    EXPECT_NEAR(mean, c.mean, 4 * c.std / std::sqrt(static_cast<double>(t->n_elements())) + 1e-9) << c.name;
    EXPECT_NEAR(std / c.std, 1.0, c.tol * 3) << c.name;
  }
  const float* a = reinterpret_cast<const float*>(f->FindTensor("blk.0.ssm_a")->data);
  const float* dt = reinterpret_cast<const float*>(f->FindTensor("blk.0.ssm_dt.bias")->data);
  for (int h = 0; h < 4; ++h) {
    EXPECT_LE(a[h], -1.0f);
    EXPECT_GE(a[h], -16.0f);
    const double softplus = std::log1p(std::exp(static_cast<double>(dt[h])));
    EXPECT_GE(softplus, 1e-3 * 0.999);
    EXPECT_LE(softplus, 1e-1 * 1.001);
  }
  std::remove(path.c_str());
}

TEST(MakeModel, DrawsMoeWeightsWithTheFixtureScales) {
  const std::string path = Make("f32", 0, 2, "tiny-next");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  const double e = std::sqrt(128.0);
  struct Case {
    const char* name;
    double std;
  };
  const Case cases[] = {
      {"blk.0.ffn_gate_inp.weight", 2.5 / e},  // router
      {"blk.0.ffn_gate_exps.weight", 1.0 / e},
      {"blk.0.ffn_up_exps.weight", 1.0 / e},
      {"blk.0.ffn_down_exps.weight", 0.5 / std::sqrt(32.0)},
      {"blk.0.ffn_gate_shexp.weight", 1.0 / e},
      {"blk.0.ffn_down_shexp.weight", 0.5 / std::sqrt(64.0)},
      {"blk.3.ffn_gate_inp_shexp.weight", 1.0 / e},
  };
  for (const Case& c : cases) {
    const gguf::TensorInfo* t = f->FindTensor(c.name);
    ASSERT_NE(t, nullptr) << c.name;
    auto [mean, std] = Moments(*t);
    EXPECT_NEAR(mean, 0, 4 * c.std / std::sqrt(static_cast<double>(t->n_elements()))) << c.name;
    EXPECT_NEAR(std / c.std, 1.0, 0.2) << c.name;
  }
  // ssm_ba {E, 2 Hv}: per key head g (Hk = 2, r = 2) rows [beta, beta, alpha, alpha]; alpha rows have half
  // the scale of the beta rows, like ssm_alpha / ssm_beta.
  const gguf::TensorInfo* ba = f->FindTensor("blk.0.ssm_ba.weight");
  ASSERT_NE(ba, nullptr);
  ASSERT_EQ(ba->ShapeString(), "{128, 8}");
  const float* w = reinterpret_cast<const float*>(ba->data);
  double ss[2] = {0, 0};
  for (int row = 0; row < 8; ++row) {
    for (int i = 0; i < 128; ++i) ss[row % 4 >= 2] += double(w[row * 128 + i]) * w[row * 128 + i];
  }
  EXPECT_NEAR(std::sqrt(ss[0] / 512) * e, 1.0, 0.2);
  EXPECT_NEAR(std::sqrt(ss[1] / 512) * e, 0.5, 0.1);
  for (const gguf::TensorInfo& t : f->tensors()) EXPECT_EQ(t.type, gguf::TensorType::kF32) << t.name;
  std::remove(path.c_str());
}

TEST(MakeModel, KeepsRoutersInF32AndQuantisesExperts) {
  const std::string path = Make("q8_0", 0, 2, "tiny-moe");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_inp.weight")->type, gguf::TensorType::kF32);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_inp_shexp.weight")->type, gguf::TensorType::kF32);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_gate_exps.weight")->type, gguf::TensorType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down_exps.weight")->type, gguf::TensorType::kQ8_0);
  EXPECT_EQ(f->FindTensor("blk.0.ssm_beta.weight")->type, gguf::TensorType::kQ8_0);
  std::remove(path.c_str());
}

TEST(MakeModel, KeepsNormsAndSmallTensorsInF32AndQuantisesMatrices) {
  const std::string path = Make("bf16");
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  for (const gguf::TensorInfo& t : f->tensors()) {
    const bool f32 = t.n_dims == 1 || t.name.find("ssm_conv1d") != std::string::npos;
    EXPECT_EQ(t.type, f32 ? gguf::TensorType::kF32 : gguf::TensorType::kBF16) << t.name;
  }
  EXPECT_EQ(*f->GetU32("general.file_type"), 32u);
  std::remove(path.c_str());
}

TEST(MakeModel, RejectsUnknownPresetsTypesAndNonVocabFiles) {
  auto vocab = OpenOrDie(kVocab);
  MakeModelOptions opt;
  opt.preset = "nope";
  EXPECT_THAT(MakeModel(opt, *vocab, TempPath("x.gguf")).error().message, HasSubstr("unknown preset"));
  opt.preset = "tiny";
  opt.file_type = "q3_x";
  EXPECT_THAT(MakeModel(opt, *vocab, TempPath("x.gguf")).error().message, HasSubstr("unknown --type"));
  gguf::Writer w;
  w.SetString("general.architecture", "qwen35");
  std::vector<uint8_t> bytes;
  ASSERT_TRUE(w.OpenBuffer(&bytes).ok());
  ASSERT_TRUE(w.Close().ok());
  auto empty = gguf::File::FromBuffer(bytes);
  ASSERT_TRUE(empty.ok());
  opt.file_type = "f32";
  EXPECT_THAT(MakeModel(opt, **empty, TempPath("x.gguf")).error().message,
              HasSubstr("tokenizer.ggml.tokens"));
  EXPECT_FALSE(FileExists(TempPath("x.gguf")));
}

TEST(MakeModel, PlansEveryPresetWithConsistentShapes) {
  auto vocab = OpenOrDie(kVocab);
  for (const Preset& p : Presets()) {
    gguf::Writer w;
    MakeModelOptions opt;
    opt.preset = p.name;
    opt.file_type = "q4_k_m";
    auto plan = PlanModel(opt, *vocab, &w);
    ASSERT_TRUE(plan.ok()) << p.name << ": " << plan.error().message;
    const ModelConfig& c = plan->config;
    int64_t attn = 0, gdn = 0, mamba = 0, conv = 0, kda = 0, want_attn = c.n_nextn, want_rec = 0;
    for (int64_t i = 0; i < c.n_layer; ++i) {
      want_attn += c.IsAttention(i);
      want_rec += c.IsRecurrent(i);
    }
    for (const TensorSpec& t : plan->tensors) {
      attn += t.kind == (c.is_kimi() ? "attn_kv_a_mqa" : "attn_q");  // KDA layers have an attn_q too
      kda += t.kind == "ssm_f_a";
      gdn += t.kind == "attn_qkv";
      mamba += t.kind == "ssm_in";
      conv += t.kind == "shortconv.in_proj";
    }
    EXPECT_EQ(attn, want_attn) << p.name;
    EXPECT_EQ(c.is_mamba2() ? mamba : c.is_lfm2() ? conv : c.is_kimi() ? kda : gdn, want_rec) << p.name;
    if (!c.is_mamba2() && !c.is_lfm2() && !c.is_kimi()) {
      EXPECT_EQ(want_attn, c.n_layer / 4 + c.n_nextn) << p.name;
    }
    int64_t experts = 0, dense = 0, ba = 0;
    for (const TensorSpec& t : plan->tensors) {
      experts += t.kind == "ffn_gate_exps";
      dense += t.kind == "ffn_up";
      ba += t.kind == "ssm_ba";
      if (t.kind == "ffn_down_exps") {
        EXPECT_EQ(t.ne, (std::vector<int64_t>{c.n_ff_exp, c.n_embd, c.n_expert})) << p.name;
      }
    }
    const bool granite_moe = c.arch == "granitehybrid" && c.n_expert > 0;  // experts in every block
    // lfm2moe, kimi-linear: leading dense blocks, then MoE blocks.
    const int64_t lfm2_dense = c.arch == "lfm2moe" || c.is_kimi() ? c.n_dense_lead : c.n_layer;
    EXPECT_EQ(experts, c.is_moe()      ? c.n_layer_all()
                       : granite_moe   ? c.n_layer
                       : c.is_lfm2() || c.is_kimi() ? c.n_layer - lfm2_dense
                                       : 0)
        << p.name;
    const int64_t want_dense = granite_moe                  ? 0
                               : c.is_lfm2() || c.is_kimi() ? lfm2_dense
                               : c.arch == "granitehybrid"  ? c.n_layer
                               : c.arch == "nemotron_h_moe" ? 0
                               : c.is_mamba2()             ? c.n_layer - want_attn - want_rec
                               : c.is_moe()             ? 0
                                                        : c.n_layer_all();
    EXPECT_EQ(dense, want_dense) << p.name;
    EXPECT_EQ(ba, c.arch == "qwen3next" ? gdn : 0) << p.name;
    EXPECT_GT(w.FileSize(), 0u);
  }
}

TEST(ExtractVocab, KeepsEveryTokenizerKeyAndNoTensors) {
  auto vocab = OpenOrDie(kVocab);
  const std::string path = TempPath("vocab.gguf");
  ASSERT_TRUE(ExtractVocab(*vocab, path).ok());
  auto f = OpenOrDie(path);
  ASSERT_NE(f, nullptr);
  EXPECT_TRUE(f->tensors().empty());
  size_t n_tok = 0;
  for (const auto& [key, value] : vocab->metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++n_tok;
    ASSERT_NE(f->Find(key), nullptr) << key;
    EXPECT_EQ(gguf::DescribeValue(*f->Find(key)), gguf::DescribeValue(value)) << key;
  }
  EXPECT_EQ(n_tok, 10u);
  std::remove(path.c_str());
}

TEST(DemoModel, EmbedsTheRepoVocab) {
  auto disk = ReadFileToString(kVocab);
  ASSERT_TRUE(disk.ok());
  const auto embedded = TinyVocabGguf();
  ASSERT_EQ(embedded.size(), disk->size());
  EXPECT_EQ(0, std::memcmp(embedded.data(), disk->data(), disk->size()));
}

TEST(DemoModel, IsGeneratedOnceThenReusedAndRegeneratedWhenDamaged) {
  const std::string dir = TempPath("cache");
  auto p1 = EnsureDemoModel(dir, "q8_0");
  ASSERT_TRUE(p1.ok()) << p1.error().message;
  auto first = ReadFileToString(*p1);
  ASSERT_TRUE(first.ok());
  auto f = OpenOrDie(*p1);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->FindTensor("blk.0.attn_qkv.weight")->type, gguf::TensorType::kQ8_0);
  // A coding agent's prompt fits: `rewind serve` (-c 0: the training context) gets 64K tokens per slot.
  EXPECT_EQ(*f->GetU32("qwen35.context_length"), static_cast<uint32_t>(kDemoContext));
  f.reset();

  auto p2 = EnsureDemoModel(dir, "q8_0");
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(*p2, *p1);

  // Damage one byte: the hash no longer matches, so the file is regenerated identically.
  std::string damaged = *first;
  damaged[damaged.size() / 2] ^= 0x5A;
  ASSERT_TRUE(WriteFileAtomic(*p1, damaged).ok());
  auto p3 = EnsureDemoModel(dir, "q8_0");
  ASSERT_TRUE(p3.ok());
  auto again = ReadFileToString(*p3);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(*again == *first);
  EXPECT_FALSE(EnsureDemoModel(dir, "q4_0").ok());
  std::remove(p1->c_str());
  std::remove((*p1 + ".fnv1a").c_str());
  ::rmdir(dir.c_str());
}

TEST(Rng, IsDeterministicAndRoughlyStandardNormal) {
  Rng a(42), b(42);
  double s = 0, s2 = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double x = a.Normal();
    EXPECT_EQ(x, b.Normal());
    s += x;
    s2 += x * x;
  }
  EXPECT_NEAR(s / n, 0.0, 0.01);
  EXPECT_NEAR(s2 / n, 1.0, 0.02);
  EXPECT_NE(RowSeed(1, "a", 0), RowSeed(1, "a", 1));
  EXPECT_NE(RowSeed(1, "a", 0), RowSeed(1, "b", 0));
}

}  // namespace
}  // namespace rw::modelgen
