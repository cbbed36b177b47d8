// Images end to end against llama.cpp v0.5.0 (tests/data/golden_images/README.md): the tiny qwen35 fixture with a
// tiny random qwen3vl_merger mmproj; for each case the prompt is rebuilt from the reference's chunks (text token
// ids, and our own encoding of the same image file, whose token grid must match llama.cpp's), evaluated, and the
// last prompt row and the greedy path's top-8 logits compared within the F32 tolerance (docs/conformance.md).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/file.h"
#include "model/forward.h"
#include "vision/image_pipeline.h"

namespace rw::vision {
namespace {

const std::string kDir = std::string(REWIND_TEST_DATA) + "/golden_images/";
const std::string kModel = std::string(REWIND_TEST_DATA) + "/golden/models/tiny-qwen35-f32.gguf";
constexpr double kTolerance = 1e-2;  // F32 models

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<model::ImageSpan> spans;
  std::vector<std::shared_ptr<const ImageEmbedding>> keep;
};

TEST(ImageGolden, LogitsMatchLlamaCppMtmdWithinTheF32Tolerance) {
  auto manifest_text = ReadFileToString(kDir + "ref/manifest.json");
  ASSERT_TRUE(manifest_text.ok());
  const auto manifest = nlohmann::json::parse(*manifest_text);
  auto model = model::Model::Load(kModel, {2});
  ASSERT_TRUE(model.ok()) << model.error().ToString();
  model::Model& m = **model;
  auto pipe = ImagePipeline::Load(kDir + "tiny-mmproj-f32.gguf", PipelineOptions{});
  ASSERT_TRUE(pipe.ok()) << pipe.error().ToString();
  const int32_t V = m.config().n_vocab;
  double worst = 0;
  for (const auto& c : manifest) {
    const std::string name = c["name"];
    Seq s;
    size_t image = 0;
    for (const auto& seg : c["segments"]) {
      if (seg.contains("text")) {
        for (int t : seg["text"]) s.tokens.push_back(t);
        continue;
      }
      auto bytes = ReadFileToString(kDir + c["images"][image++].get<std::string>());
      ASSERT_TRUE(bytes.ok());
      auto enc = (*pipe)->Encode(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes->data()), bytes->size()));
      ASSERT_TRUE(enc) << enc.error().ToString();
      const ImageEmbedding& e = *enc->embedding;
      ASSERT_EQ(e.nx, seg["nx"].get<int>()) << name;
      ASSERT_EQ(e.ny, seg["ny"].get<int>()) << name;
      ASSERT_EQ(std::max(e.nx, e.ny), seg["n_pos"].get<int>()) << name;
      s.spans.push_back({static_cast<int32_t>(s.tokens.size()), e.nx, e.ny, e.rows.data()});
      const auto ids = ImageTokenIds(enc->key, e.n_tokens());
      s.tokens.insert(s.tokens.end(), ids.begin(), ids.end());
      s.keep.push_back(enc->embedding);
    }
    auto images = model::SeqImages::Make(s.spans);
    ASSERT_TRUE(images);
    const auto& greedy = c["greedy"];
    const int32_t n = static_cast<int32_t>(s.tokens.size()), total = n + static_cast<int32_t>(greedy.size());
    const int32_t pages = (total + 31) / 32;
    auto kv = model::KvStorage::Create(m.MakeKvConfig(pages, 32, model::KvType::kF32));
    auto st = model::StateStorage::Create(m.MakeStateShape(), 1);
    ASSERT_TRUE(kv.ok() && st.ok());
    std::vector<int32_t> table(pages);
    for (int32_t i = 0; i < pages; ++i) table[i] = i;
    model::ForwardOutput out;
    // The prompt in chunks of 29 tokens (chunk ends fall inside the images): same bits as one batch (I1).
    for (int32_t done = 0; done < n;) {
      const int32_t k = std::min(29, n - done);
      model::BatchSeq b;
      b.state_in = done == 0 ? -1 : 0;
      b.pages = table;
      b.pos0 = done;
      b.tokens = std::span<const int32_t>(s.tokens.data() + done, k);
      b.images = &*images;
      ASSERT_TRUE(m.Forward({&b, 1}, **kv, **st, &out).ok());
      done += k;
    }
    std::vector<float> ref(V);
    {
      std::ifstream f(kDir + "ref/" + name + ".f32", std::ios::binary);
      f.read(reinterpret_cast<char*>(ref.data()), V * 4);
      ASSERT_TRUE(f.good()) << name;
    }
    double max_abs = 0;
    for (int32_t v = 0; v < V; ++v) max_abs = std::max(max_abs, std::fabs(double(out.Row(0)[v]) - ref[v]));
    // Greedy path: llama.cpp's tokens fed one by one, its top-8 logits compared after each.
    double decode_max = 0;
    int32_t pos = n;
    for (const auto& step : greedy) {
      const int32_t tok = step["token"];
      model::BatchSeq d;
      d.state_in = 0;
      d.pages = table;
      d.pos0 = pos++;
      d.tokens = {&tok, 1};
      d.images = &*images;
      ASSERT_TRUE(m.Forward({&d, 1}, **kv, **st, &out).ok());
      for (const auto& t : step["top"]) decode_max = std::max(decode_max, std::fabs(double(out.Row(0)[t[0].get<int>()]) - t[1].get<double>()));
    }
    std::printf("%-12s prompt %4d tokens (%zu images)  last-row max|d| %.3g  decode max|d| %.3g\n", name.c_str(), n,
                s.spans.size(), max_abs, decode_max);
    EXPECT_LE(max_abs, kTolerance) << name;
    EXPECT_LE(decode_max, kTolerance) << name;
    worst = std::max({worst, max_abs, decode_max});
  }
  std::printf("worst max|d| %.3g (tolerance %.0e)\n", worst, kTolerance);
}

}  // namespace
}  // namespace rw::vision
