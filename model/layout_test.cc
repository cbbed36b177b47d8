// Alternative tensor layouts give bit-identical results: qwen3next's legacy fused ssm_in (instead of attn_qkv +
// attn_gate) and the fused ffn_gate_up_exps (instead of ffn_gate_exps + ffn_up_exps). The rewritten files hold
// the same rows in another order, and every output element is one dot product of one row, so logits must match
// the original file bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <unistd.h>

#include "gguf/writer.h"
#include "model/forward.h"

namespace rw::model {
namespace {

const std::string kDir = std::string(REWIND_TEST_DATA) + "/golden/models/";

struct T {
  std::string name;
  gguf::TensorType type;
  std::vector<int64_t> ne;
  std::vector<uint8_t> data;
};

// Copies `src` with its tensor list transformed, into a temporary file; returns its path.
std::string Rewrite(const std::string& src_path, const std::function<void(std::vector<T>&)>& transform) {
  auto src = std::move(gguf::File::Open(src_path)).value();
  std::vector<T> ts;
  for (const auto& t : src->tensors())
    ts.push_back({t.name, t.type, std::vector<int64_t>(t.ne, t.ne + t.n_dims), std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  transform(ts);
  gguf::Writer w;
  for (const auto& [k, v] : src->metadata()) w.Set(k, v);
  for (const auto& t : ts) EXPECT_TRUE(w.AddTensor(t.name, t.type, t.ne).ok()) << t.name;
  const std::string path = "/tmp/rewind_layout_test_" + std::to_string(getpid()) + ".gguf";
  EXPECT_TRUE(w.Open(path).ok());
  for (const auto& t : ts) EXPECT_TRUE(w.WriteTensor(t.name, t.data.data(), t.data.size()).ok()) << t.name;
  EXPECT_TRUE(w.Close().ok());
  return path;
}

std::vector<float> Logits(const std::string& path) {
  auto m = std::move(Model::Load(path)).value();
  auto kv = std::move(KvStorage::Create(m->MakeKvConfig(2, 32, KvType::kF32))).value();
  auto st = std::move(StateStorage::Create(m->MakeStateShape(), 1)).value();
  std::vector<int32_t> pages = {0, 1}, toks;
  for (int i = 0; i < 20; ++i) toks.push_back((i * 197 + 11) % m->config().n_vocab);
  BatchSeq b{-1, 0, pages, 0, toks, true};
  ForwardOutput out;
  EXPECT_TRUE(m->Forward({&b, 1}, *kv, *st, &out).ok());
  return out.logits;
}

T* Find(std::vector<T>& ts, const std::string& name) {
  for (auto& t : ts)
    if (t.name == name) return &t;
  return nullptr;
}

TEST(Layout, Qwen3NextLegacySsmInGivesIdenticalLogits) {
  const std::string orig = kDir + "tiny-qwen3next-f32.gguf";
  const int64_t E = 128, S = 32, Hk = 2, Hv = 4, r = Hv / Hk, Kd = S * Hk;
  const std::string path = Rewrite(orig, [&](std::vector<T>& ts) {
    for (int il = 0; il < 8; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      T* qkv = Find(ts, p + "attn_qkv.weight");
      T* gate = Find(ts, p + "attn_gate.weight");
      if (qkv == nullptr) continue;
      auto row = [&](const T* t, int64_t i) { return t->data.data() + i * E * 4; };
      T in{p + "ssm_in.weight", gguf::TensorType::kF32, {E, 2 * Kd + 2 * Hv * S}, {}};
      for (int64_t g = 0; g < Hk; ++g) {
        auto put = [&](const T* t, int64_t first, int64_t n) {
          in.data.insert(in.data.end(), row(t, first), row(t, first + n));
        };
        put(qkv, g * S, S);
        put(qkv, Kd + g * S, S);
        put(qkv, 2 * Kd + g * r * S, r * S);
        put(gate, g * r * S, r * S);
      }
      *qkv = std::move(in);
      ts.erase(ts.begin() + (gate - ts.data()));
    }
  });
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_TRUE((*m)->weights().layers[0].gdn.legacy_in);
  const auto a = Logits(orig), b = Logits(path);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  unlink(path.c_str());
}

TEST(Layout, FusedGateUpExpertsGiveIdenticalLogits) {
  const std::string orig = kDir + "tiny-qwen35moe-f32.gguf";
  const int64_t E = 128, F = 32, X = 8;
  const std::string path = Rewrite(orig, [&](std::vector<T>& ts) {
    for (int il = 0; il < 8; ++il) {
      const std::string p = "blk." + std::to_string(il) + ".";
      T* g = Find(ts, p + "ffn_gate_exps.weight");
      T* u = Find(ts, p + "ffn_up_exps.weight");
      T gu{p + "ffn_gate_up_exps.weight", gguf::TensorType::kF32, {E, 2 * F, X}, {}};
      const int64_t eb = E * F * 4;
      for (int64_t e = 0; e < X; ++e) {
        gu.data.insert(gu.data.end(), g->data.begin() + e * eb, g->data.begin() + (e + 1) * eb);
        gu.data.insert(gu.data.end(), u->data.begin() + e * eb, u->data.begin() + (e + 1) * eb);
      }
      *g = std::move(gu);
      ts.erase(ts.begin() + (Find(ts, p + "ffn_up_exps.weight") - ts.data()));
    }
  });
  auto m = Model::Load(path);
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  EXPECT_TRUE((*m)->weights().layers[0].ffn.fused_gate_up);
  const auto a = Logits(orig), b = Logits(path);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
  unlink(path.c_str());
}

}  // namespace
}  // namespace rw::model
