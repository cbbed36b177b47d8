// What `rewind bench` divides decode's bandwidth by: the bytes of weights one decode step reads.
#include <gtest/gtest.h>

#include <string>

#include "model/forward.h"

namespace rw::model {
namespace {

const std::string kDir = std::string(REWIND_TEST_DATA) + "/golden/models/";

// Sums the file's tensors by kind: the stacked experts, the token embedding, the MTP blocks and the rest.
struct Parts {
  uint64_t experts = 0, embedding = 0, mtp = 0, rest = 0;
};
Parts Split(const Model& m) {
  Parts p;
  for (const auto& t : m.file().tensors()) {
    if (t.name.rfind("blk.", 0) == 0 && std::stoi(t.name.substr(4)) >= m.config().n_layer) p.mtp += t.nbytes;
    else if (t.name.find("_exps.") != std::string::npos) p.experts += t.nbytes;
    else if (t.name == "token_embd.weight") p.embedding += t.nbytes;
    else p.rest += t.nbytes;
  }
  return p;
}

TEST(DecodeWeightBytes, AMoeTokenReadsOnlyItsRoutedExperts) {
  auto m = Model::Load(kDir + "tiny-qwen35moe-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  const auto& cfg = (*m)->config();
  ASSERT_GT(cfg.n_expert, cfg.n_expert_used);
  const Parts p = Split(**m);
  ASSERT_GT(p.experts, 0u);
  ASSERT_GT(p.mtp, 0u);
  // Untied (output.weight present): the embedding is one row per token, not counted; nor are the MTP blocks.
  ASSERT_NE((*m)->file().FindTensor("output.weight"), nullptr);
  EXPECT_EQ((*m)->decode_weight_bytes(), p.rest + p.experts / cfg.n_expert * cfg.n_expert_used);
}

TEST(DecodeWeightBytes, ADenseTiedModelReadsItsEmbeddingAsTheHead) {
  auto m = Model::Load(kDir + "tiny-qwen35-f32.gguf");
  ASSERT_TRUE(m.ok()) << m.error().ToString();
  ASSERT_EQ((*m)->file().FindTensor("output.weight"), nullptr);
  const Parts p = Split(**m);
  EXPECT_EQ(p.experts, 0u);
  EXPECT_EQ((*m)->decode_weight_bytes(), p.rest + p.embedding);
}

}  // namespace
}  // namespace rw::model
