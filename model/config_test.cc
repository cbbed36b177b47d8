// ModelConfig and weight binding on the tiny fixtures, plus clear errors for unsupported or broken inputs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "gguf/gguf.h"
#include "gguf/writer.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"

namespace rw::model {
namespace {

using ::testing::HasSubstr;

const std::string kDir = std::string(REWIND_TEST_DATA) + "/golden/models/";

// Mamba-2 hybrids: nemotron_h layer kinds from the per-layer head_count_kv / feed_forward_length arrays,
// granitehybrid kinds from head_count_kv, its multipliers and RoPE switch; state and replay sizes.
TEST(ModelConfig, ReadsMamba2HybridLayerKindsAndSizes) {
  auto kinds = [](const ModelConfig& c) {
    std::string k;
    for (LayerKind x : c.kinds) k += KindLetter(x);
    return k;
  };
  auto f = gguf::File::Open(kDir + "tiny-nemotron-h-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->arch, Arch::kNemotronH);
  EXPECT_EQ(kinds(*c), "MFMAFMAF");
  EXPECT_EQ(c->kind_index, (std::vector<int32_t>{0, 0, 1, 0, 1, 2, 1, 2}));
  EXPECT_EQ(c->n_ff, 256);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->ssm_head_dim(), 32);
  EXPECT_FALSE(c->attn_rope);
  EXPECT_FALSE(c->attn_gated);
  // 3 Mamba-2 layers: conv [384][3] + state [8][32][32]; replay row 384 + 8 dt.
  EXPECT_EQ(c->StateBytesPerSeq(), 3u * 4 * (384 * 3 + 8 * 32 * 32));
  EXPECT_EQ(c->ReplayBytesPerToken(), 3u * 4 * (384 + 8));
  EXPECT_EQ(c->KvBytesPerToken(kernels::KvType::kF16), 2u * 2 * 2 * 32 * 2);
  auto g = gguf::File::Open(kDir + "tiny-granite-h-f32.gguf");
  ASSERT_TRUE(g.ok()) << g.error().ToString();
  auto d = ModelConfig::FromGguf(**g);
  ASSERT_TRUE(d.ok()) << d.error().ToString();
  EXPECT_EQ(d->arch, Arch::kGraniteHybrid);
  EXPECT_EQ(kinds(*d), "MMMAMMAM");
  EXPECT_TRUE(d->attn_rope);
  EXPECT_TRUE(d->rope_adjacent);
  EXPECT_FLOAT_EQ(d->embedding_scale, 4.0f);
  EXPECT_FLOAT_EQ(d->residual_scale, 0.5f);
  EXPECT_FLOAT_EQ(d->attn_scale, 0.03125f);
  EXPECT_FLOAT_EQ(d->logit_scale, 0.5f);
  EXPECT_EQ(d->n_ff, 128);
  EXPECT_FALSE(d->softmax_moe());
  // Granite MoE: experts feed_forward_length wide, an ungated shared expert; 4 Mamba-2 layers.
  auto gm = gguf::File::Open(kDir + "tiny-granite-h-moe-f32.gguf");
  ASSERT_TRUE(gm.ok()) << gm.error().ToString();
  auto m = ModelConfig::FromGguf(**gm);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ(kinds(*m), "MMAMAM");
  EXPECT_TRUE(m->is_granite_moe());
  EXPECT_TRUE(m->softmax_moe());
  EXPECT_FALSE(m->is_moe());
  EXPECT_EQ(m->n_expert, 8);
  EXPECT_EQ(m->n_expert_used, 2);
  EXPECT_EQ(m->n_ff_exp, 16);
  EXPECT_EQ(m->n_ff_shexp, 64);
  // conv [320][3] + state [8][32][16] per Mamba-2 layer; replay row 320 + 8 dt.
  EXPECT_EQ(m->StateBytesPerSeq(), 4u * 4 * (320 * 3 + 8 * 32 * 16));
  EXPECT_EQ(m->ReplayBytesPerToken(), 4u * 4 * (320 + 8));
}

// LFM2: short-conv layers where head_count_kv is 0, q/k-normed NeoX attention, l_cache 3; the state is the conv
// window alone ([E][2] per short-conv layer), the replay row one B·x row.
TEST(ModelConfig, ReadsLfm2ShortConvLayersAndSizes) {
  auto f = gguf::File::Open(kDir + "tiny-lfm2-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->arch, Arch::kLfm2);
  std::string k;
  for (LayerKind x : c->kinds) k += KindLetter(x);
  EXPECT_EQ(k, "CCACAC");
  EXPECT_EQ(c->kind_index, (std::vector<int32_t>{0, 1, 0, 2, 1, 3}));
  EXPECT_EQ(c->ssm_conv_kernel, 3);
  EXPECT_EQ(c->ssm_conv_dim(), 128);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_TRUE(c->attn_rope);
  EXPECT_FALSE(c->attn_gated);
  EXPECT_FALSE(c->rope_adjacent);
  EXPECT_EQ(c->n_gdn_layers(), 0);
  EXPECT_EQ(c->StateBytesPerSeq(), 4u * 4 * 128 * 2);
  EXPECT_EQ(c->ReplayBytesPerToken(), 4u * 4 * 128);
  auto m = Model::Load(kDir + "tiny-lfm2-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ((*m)->MakeStateShape().bytes_per_state(), c->StateBytesPerSeq());
  // lfm2moe: two leading dense blocks, then sigmoid-routed MoE blocks (renormalised, no shared expert).
  auto fm = gguf::File::Open(kDir + "tiny-lfm2-moe-f32.gguf");
  ASSERT_TRUE(fm.ok()) << fm.error().ToString();
  auto moe = ModelConfig::FromGguf(**fm);
  ASSERT_TRUE(moe.ok()) << moe.error().ToString();
  EXPECT_EQ(moe->arch, Arch::kLfm2Moe);
  EXPECT_TRUE(moe->is_lfm2());
  EXPECT_TRUE(moe->sigmoid_moe());
  EXPECT_EQ(moe->n_layer_dense_lead, 2);
  EXPECT_EQ(moe->n_expert, 8);
  EXPECT_EQ(moe->n_expert_used, 2);
  EXPECT_EQ(moe->n_ff_exp, 16);
  EXPECT_TRUE(moe->expert_weights_norm);
  EXPECT_EQ(moe->StateBytesPerSeq(), c->StateBytesPerSeq());
}

// kimi-linear: KDA where head_count_kv is 0 (q|k|v conv windows, [H][S][S] states, replay row q|k|v + beta +
// the per-channel gate projection), MLA elsewhere (one cached row of kv_lora_rank + rope dims, as MQA).
TEST(ModelConfig, ReadsKimiLinearKdaAndMlaLayersAndSizes) {
  auto f = gguf::File::Open(kDir + "tiny-kimi-linear-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->arch, Arch::kKimiLinear);
  std::string k;
  for (LayerKind x : c->kinds) k += KindLetter(x);
  EXPECT_EQ(k, "KKAKKA");
  EXPECT_EQ(c->kind_index, (std::vector<int32_t>{0, 1, 0, 2, 3, 1}));
  EXPECT_EQ(c->ssm_conv_dim(), 3 * 128);
  EXPECT_EQ(c->n_head_kv, 1);
  EXPECT_EQ(c->head_dim, 48 + 16);
  EXPECT_EQ(c->mla_k, 48);
  EXPECT_EQ(c->mla_v, 32);
  EXPECT_FALSE(c->attn_rope);
  EXPECT_TRUE(c->sigmoid_moe());
  EXPECT_EQ(c->n_layer_dense_lead, 1);
  EXPECT_EQ(c->n_ff_shexp, 32);
  EXPECT_FLOAT_EQ(c->expert_weights_scale, 2.446f);
  EXPECT_EQ(c->StateBytesPerSeq(), 4u * 4 * (384 * 3 + 4 * 32 * 32));
  EXPECT_EQ(c->ReplayBytesPerToken(), 4u * 4 * (384 + 4 + 128));
  EXPECT_EQ(c->KvBytesPerToken(kernels::KvTypes(kernels::KvType::kF32)), 2u * 2 * 64 * 4);
  auto m = Model::Load(kDir + "tiny-kimi-linear-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_EQ((*m)->MakeStateShape().bytes_per_state(), c->StateBytesPerSeq());
}

TEST(ModelConfig, ReadsTinyQwen35Hyperparameters) {
  auto f = gguf::File::Open(kDir + "tiny-qwen35-f32.gguf");
  ASSERT_TRUE(f.ok()) << f.error().ToString();
  auto c = ModelConfig::FromGguf(**f);
  ASSERT_TRUE(c.ok()) << c.error().ToString();
  EXPECT_EQ(c->arch, Arch::kQwen35);
  EXPECT_EQ(c->n_embd, 256);
  EXPECT_EQ(c->n_layer, 8);
  EXPECT_EQ(c->n_nextn, 1);
  EXPECT_EQ(c->n_vocab, 4000);
  EXPECT_EQ(c->n_head, 4);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->n_rot, 16);
  EXPECT_EQ(c->ssm_conv_dim(), 512);
  EXPECT_EQ(c->ssm_heads, 4);
  EXPECT_EQ(c->ssm_group, 2);
  EXPECT_TRUE(c->imrope);
  EXPECT_EQ(c->rope_sections, (std::array<int32_t, 4>{3, 3, 2, 0}));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(c->kinds[i], (i == 3 || i == 7) ? LayerKind::kAttention : LayerKind::kGdn) << i;
  // README section 5: 6 GDN layers x 4 B x (3 x 512 + 64 x 256) = 430080 B of recurrent payload.
  EXPECT_EQ(c->StateBytesPerSeq(), 430080u);
  // 2 attention layers x (K + V) x 2 heads x 64 x 4 B = 2048 B per token with an F32 cache.
  EXPECT_EQ(c->KvBytesPerToken(kernels::KvType::kF32), 2048u);
  EXPECT_EQ(c->KvBytesPerToken(kernels::KvType::kQ8_0), 2048u / 4 * 34 / 32);
  EXPECT_EQ(c->KvBytesPerToken({kernels::KvType::kQ4_0, kernels::KvType::kF16}), 2048u / 4 + 2048u / 4 * 18 / 64);
  // Tiled (qwen35) vs grouped (qwen3next) key heads.
  EXPECT_EQ(c->KeyHead(3), 1);
}

TEST(ModelConfig, BindsTiedOutputHead) {
  auto m = Model::Load(kDir + "tiny-qwen35-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_TRUE((*m)->weights().tied);
  EXPECT_EQ((*m)->weights().output.data, (*m)->weights().token_embd.data);
}

TEST(ModelConfig, MissingFileIsAnError) {
  auto m = Model::Load(kDir + "does-not-exist.gguf");
  EXPECT_FALSE(m.ok());
}

}  // namespace
}  // namespace rw::model

namespace rw::model {
namespace {

// Rewrites a fixture (the tiny qwen35 file unless `base` says otherwise) into memory with one change, for
// error-path tests.
struct Mutation {
  std::string base = "tiny-qwen35-f32.gguf";
  std::string drop_key;
  std::string set_key;
  gguf::Value set_value;
  std::string drop_tensor;
  std::string reshape_tensor;
  std::vector<int64_t> new_shape;
};

Expected<std::unique_ptr<gguf::File>> Mutate(const Mutation& m) {
  REWIND_ASSIGN_OR_RETURN(auto src, gguf::File::Open(kDir + m.base));
  gguf::Writer w;
  for (const auto& [k, v] : src->metadata()) {
    if (k == m.drop_key) continue;
    w.Set(k, k == m.set_key ? m.set_value : v);
  }
  if (!m.set_key.empty() && !src->Has(m.set_key)) w.Set(m.set_key, m.set_value);
  std::vector<const gguf::TensorInfo*> kept;
  for (const auto& t : src->tensors()) {
    if (t.name == m.drop_tensor) continue;
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (t.name == m.reshape_tensor) ne = m.new_shape;
    REWIND_RETURN_IF_ERROR(w.AddTensor(t.name, t.type, ne));
    kept.push_back(&t);
  }
  std::vector<uint8_t> buf;
  REWIND_RETURN_IF_ERROR(w.OpenBuffer(&buf));
  for (size_t i = 0; i < kept.size(); ++i) {
    const uint64_t n = w.tensors()[i].nbytes;
    std::vector<uint8_t> data(n, 0);
    std::memcpy(data.data(), kept[i]->data, std::min(n, kept[i]->nbytes));
    REWIND_RETURN_IF_ERROR(w.WriteTensor(kept[i]->name, data.data(), n));
  }
  REWIND_RETURN_IF_ERROR(w.Close());
  return gguf::File::FromBuffer(buf);
}

Status LoadError(const Mutation& m) {
  auto f = Mutate(m);
  EXPECT_TRUE(f.ok()) << f.error().ToString();
  if (!f.ok()) return Status::Ok();
  auto c = ModelConfig::FromGguf(**f);
  if (!c.ok()) return c.error();
  auto w = BindWeights(**f, *c);
  if (!w.ok()) return w.error();
  return Status::Ok();
}

TEST(ModelConfig, UnmodifiedRewriteLoads) { EXPECT_TRUE(LoadError({}).ok()); }

TEST(ModelConfig, UnknownArchitectureListsTheSupportedOnes) {
  Mutation m;
  m.set_key = "general.architecture";
  m.set_value = gguf::MakeString("llama");
  Status s = LoadError(m);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kUnsupported);
  EXPECT_THAT(s.error().message, HasSubstr("qwen35, qwen35moe, qwen3next"));
}

// kimi-linear: what rewind does not run is an input error that names it (a compressed MLA query, a softmax
// router, the unsplit kv_b of legacy files), and a missing MLA tensor is named.
TEST(ModelConfig, KimiLinearNamesWhatItDoesNotSupport) {
  auto kimi = [](Mutation m) {
    m.base = "tiny-kimi-linear-f32.gguf";
    return LoadError(m);
  };
  EXPECT_TRUE(kimi({}).ok());
  Mutation q;
  q.set_key = "kimi-linear.attention.q_lora_rank";
  q.set_value = gguf::MakeU32(32);
  Status s = kimi(q);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::kUnsupported);
  EXPECT_THAT(s.error().message, HasSubstr("q_lora_rank"));
  Mutation g;
  g.set_key = "kimi-linear.expert_gating_func";
  g.set_value = gguf::MakeU32(1);
  s = kimi(g);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("expert_gating_func 1"));
  Mutation kb;
  kb.drop_tensor = "blk.2.attn_k_b.weight";
  s = kimi(kb);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("blk.2.attn_k_b.weight"));
  Mutation conv;
  conv.reshape_tensor = "blk.0.ssm_conv1d_k.weight";
  conv.new_shape = {3, 1, 128};
  s = kimi(conv);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("blk.0.ssm_conv1d_k.weight"));
}

TEST(ModelConfig, MissingRequiredKeyIsNamed) {
  Mutation m;
  m.drop_key = "qwen35.ssm.conv_kernel";
  Status s = LoadError(m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("qwen35.ssm.conv_kernel"));
}

TEST(ModelConfig, KeyWithTheWrongTypeIsRejected) {
  Mutation m;
  m.set_key = "qwen35.embedding_length";
  m.set_value = gguf::MakeI32(256);
  Status s = LoadError(m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("qwen35.embedding_length"));
}

TEST(ModelConfig, WrongTensorShapeNamesTensorAndBothShapes) {
  Mutation m;
  m.reshape_tensor = "blk.0.ssm_a";
  m.new_shape = {5};
  Status s = LoadError(m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("blk.0.ssm_a"));
  EXPECT_THAT(s.error().message, HasSubstr("{5}"));
  EXPECT_THAT(s.error().message, HasSubstr("expected {4}"));
}

TEST(ModelConfig, MissingTensorIsNamed) {
  Mutation m;
  m.drop_tensor = "blk.3.attn_k_norm.weight";
  Status s = LoadError(m);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("blk.3.attn_k_norm.weight"));
}

}  // namespace
}  // namespace rw::model
