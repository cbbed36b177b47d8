// Requests with images through the whole engine (tiny qwen35 fixture + a tiny random qwen3vl_merger mmproj): the
// same bits cold, from the prefix cache, batched with other requests and after a restart from the disk tier (I1);
// a new question about the same image resumes after the image (checkpoint at its end); bad spans are refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "engine/collect_sink.h"
#include "engine/engine_config.h"
#include "engine/engine_images.h"
#include "engine/tiny_fixture.h"
#include "gguf/gguf.h"
#include "gpu/device.h"
#include "modelgen/mmproj_gen.h"
#include "vision/image_pipeline.h"
#include "vision/vision_testing.h"

namespace rw::engine {
namespace {

using testing::Collect;

std::unique_ptr<Engine> MakeEngine(bool cache, const std::string& cache_dir = "", int32_t device = -1) {
  EngineConfig c;
  c.device = device;
  c.model_path = testing::kTinyModel;
  c.n_ctx = 1024;
  c.n_parallel = 3;
  c.n_threads = 1;
  c.n_batch = 48;  // prompts cross several chunks, some of them inside an image
  c.kv_type = "f32";
  c.cache = cache;
  c.cache_ram_mib = 256;
  c.cache_dir = cache_dir;
  auto e = CreateEngine(c);
  EXPECT_TRUE(e.ok()) << (e.ok() ? "" : e.error().ToString());
  return e.ok() ? std::move(e).value() : nullptr;
}

std::unique_ptr<vision::ImagePipeline> Pipeline() {
  auto cfg = modelgen::MmprojPreset("tiny", 256);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(modelgen::WriteMmprojBuffer(*cfg, 11, &bytes).ok());
  auto file = gguf::File::FromBuffer(bytes);
  auto mm = vision::Mmproj::FromFile(std::move(*file));
  EXPECT_TRUE(mm) << mm.error().ToString();
  vision::PipelineOptions opt;
  opt.preprocess.min_tokens = 4;
  return std::make_unique<vision::ImagePipeline>(std::move(*mm), opt);
}

// text, <vision_start>, the image, <vision_end>, question: a request in the shape the server builds.
GenerationRequest ImageRequest(vision::ImagePipeline& p, const std::vector<uint8_t>& png, uint32_t question_seed,
                               int n_question = 12) {
  auto enc = p.Encode(png);
  EXPECT_TRUE(enc) << enc.error().ToString();
  GenerationRequest r;
  r.prompt = testing::RandomPrompt(20, 1);
  r.prompt.push_back(3983);  // <|vision_start|> in the tiny vocab
  PromptImage img;
  img.start = static_cast<int32_t>(r.prompt.size());
  img.nx = enc->embedding->nx;
  img.ny = enc->embedding->ny;
  img.rows = std::shared_ptr<const std::vector<float>>(enc->embedding, &enc->embedding->rows);
  const auto ids = vision::ImageTokenIds(enc->key, enc->embedding->n_tokens());
  r.prompt.insert(r.prompt.end(), ids.begin(), ids.end());
  r.prompt.push_back(3984);  // <|vision_end|>
  const auto q = testing::RandomPrompt(n_question, question_seed);
  r.prompt.insert(r.prompt.end(), q.begin(), q.end());
  r.images.push_back(img);
  r.max_tokens = 8;
  r.sampling.temperature = 0;
  r.logprobs = true;
  r.ignore_eos = true;
  return r;
}

std::shared_ptr<Collect> Generate(Engine& e, const GenerationRequest& r) {
  auto sink = std::make_shared<Collect>();
  auto id = e.Submit(r, sink);
  EXPECT_TRUE(id.ok()) << (id.ok() ? "" : id.error().ToString());
  if (!id.ok()) return sink;
  sink->Wait();
  return sink;
}

TEST(EngineImages, SameBitsColdAndFromTheCacheAndANewQuestionResumesAfterTheImage) {
  auto p = Pipeline();
  const auto png = vision::testing::EncodePng(vision::testing::Pattern(96, 64, 5));
  auto on = MakeEngine(true);
  auto off = MakeEngine(false);
  ASSERT_TRUE(on && off);
  const GenerationRequest first = ImageRequest(*p, png, 100);
  const int32_t image_end = first.images[0].start + first.images[0].nx * first.images[0].ny;
  auto a0 = Generate(*on, first);
  auto b0 = Generate(*off, first);
  ASSERT_EQ(a0->done.finish_reason, "length") << (a0->done.error ? a0->done.error->message : "");
  EXPECT_EQ(a0->tokens, b0->tokens);
  EXPECT_EQ(a0->logprobs, b0->logprobs);
  for (uint32_t q = 101; q < 104; ++q) {  // new questions about the same image
    const GenerationRequest next = ImageRequest(*p, png, q);
    auto a = Generate(*on, next);
    auto b = Generate(*off, next);
    EXPECT_EQ(a->tokens, b->tokens) << q;
    EXPECT_EQ(a->logprobs, b->logprobs) << q;
    // Resumed just after <|vision_end|>: only the new question is evaluated.
    EXPECT_EQ(a->done.cached_tokens, image_end + 1) << a->done.cache.reason;
    EXPECT_EQ(a->done.prompt_evaluated, static_cast<int32_t>(next.prompt.size()) - image_end - 1);
  }
  EXPECT_EQ(p->cache().misses(), 1u);  // the image was encoded once, then served from the encoder cache
  EXPECT_EQ(p->cache().hits(), 3u);
}

TEST(EngineImages, ADifferentImageDivergesAtItsFirstToken) {
  auto p = Pipeline();
  auto on = MakeEngine(true);
  auto off = MakeEngine(false);
  const auto png1 = vision::testing::EncodePng(vision::testing::Pattern(96, 64, 5));
  const auto png2 = vision::testing::EncodePng(vision::testing::Pattern(96, 64, 6));
  Generate(*on, ImageRequest(*p, png1, 100));
  const GenerationRequest other = ImageRequest(*p, png2, 100);
  auto a = Generate(*on, other);
  auto b = Generate(*off, other);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  EXPECT_LE(a->done.cached_tokens, other.images[0].start) << a->done.cache.reason;
}

TEST(EngineImages, BatchedRequestsWithImagesMatchTheSameRequestsAlone) {
  auto p = Pipeline();
  auto e = MakeEngine(false);
  std::vector<GenerationRequest> rs;
  for (uint32_t s = 0; s < 3; ++s)
    rs.push_back(ImageRequest(*p, vision::testing::EncodePng(vision::testing::Pattern(64 + 32 * s, 96, s)), 200 + s));
  std::vector<std::shared_ptr<Collect>> alone, together;
  for (const auto& r : rs) alone.push_back(Generate(*e, r));
  for (const auto& r : rs) {
    together.push_back(std::make_shared<Collect>());
    ASSERT_TRUE(e->Submit(r, together.back()).ok());
  }
  for (size_t i = 0; i < rs.size(); ++i) {
    together[i]->Wait();
    EXPECT_EQ(alone[i]->tokens, together[i]->tokens) << i;
    EXPECT_EQ(alone[i]->logprobs, together[i]->logprobs) << i;
  }
}

TEST(EngineImages, ACheckpointAfterAnImageSurvivesARestartThroughTheDiskTier) {
  const std::string dir = ::testing::TempDir() + "/rewind_images_disk_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  auto p = Pipeline();
  const auto png = vision::testing::EncodePng(vision::testing::Pattern(256, 192, 7));  // 8 x 6 tokens
  {
    auto e = MakeEngine(true, dir);
    Generate(*e, ImageRequest(*p, png, 300, 40));
  }
  auto restarted = MakeEngine(true, dir);
  auto off = MakeEngine(false);
  const GenerationRequest next = ImageRequest(*p, png, 301, 40);
  auto a = Generate(*restarted, next);
  auto b = Generate(*off, next);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  const int32_t after = next.images[0].start + next.images[0].nx * next.images[0].ny + 1;
  EXPECT_EQ(a->done.cached_tokens, after) << a->done.cache.reason;
  restarted.reset();
  std::filesystem::remove_all(dir);
}

// On the GPU (--device vulkan0) an image's rows are its embeddings with their IMRoPE positions, as on the CPU:
// the same tokens as the CPU's run (logprobs within the GPU's float tolerance), the same bits from the prefix
// cache as cold, and another image changes the answer.
TEST(EngineImages, OnTheGpuImagesGiveTheCpusAnswerAndTheSameBitsFromTheCache) {
  auto devs = gpu::ListDevices();
  if (!devs.ok() || devs->empty())
    GTEST_SKIP() << "no Vulkan device: " << (devs.ok() ? "the loader found none" : devs.error().message);
  auto p = Pipeline();
  const auto png = vision::testing::EncodePng(vision::testing::Pattern(96, 64, 5));
  auto cpu = MakeEngine(false);
  auto on = MakeEngine(true, "", 0);
  auto off = MakeEngine(false, "", 0);
  ASSERT_TRUE(cpu && on && off);
  const GenerationRequest first = ImageRequest(*p, png, 100);
  auto c0 = Generate(*cpu, first);
  auto a0 = Generate(*on, first);
  ASSERT_EQ(a0->done.finish_reason, "length") << (a0->done.error ? a0->done.error->message : "");
  EXPECT_EQ(a0->tokens, c0->tokens);
  ASSERT_EQ(a0->logprobs.size(), c0->logprobs.size());
  for (size_t i = 0; i < a0->logprobs.size(); ++i) EXPECT_NEAR(a0->logprobs[i], c0->logprobs[i], 0.02) << i;
  const GenerationRequest next = ImageRequest(*p, png, 101);  // resumes after the image from the cache
  auto a = Generate(*on, next);
  auto b = Generate(*off, next);
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_EQ(a->logprobs, b->logprobs);
  EXPECT_GT(a->done.cached_tokens, next.images[0].start) << a->done.cache.reason;
  const GenerationRequest other = ImageRequest(*p, vision::testing::EncodePng(vision::testing::Pattern(96, 64, 6)), 100);
  auto d = Generate(*off, other);
  auto dc = Generate(*cpu, other);
  EXPECT_NE(d->logprobs, a0->logprobs);
  EXPECT_EQ(d->tokens, dc->tokens);
}

TEST(EngineImages, RefusesBadSpansAndIdsOutsideAnImage) {
  auto p = Pipeline();
  auto e = MakeEngine(false);
  GenerationRequest r = ImageRequest(*p, vision::testing::EncodePng(vision::testing::Pattern(64, 64, 1)), 1);
  GenerationRequest outside = r;
  outside.prompt[0] = vision::kImageTokenBase + 5;  // a placeholder id where no image is
  EXPECT_FALSE(e->Submit(outside, std::make_shared<Collect>()).ok());
  GenerationRequest past = r;
  past.images[0].start = static_cast<int32_t>(r.prompt.size()) - 2;  // span past the prompt's end
  EXPECT_FALSE(e->Submit(past, std::make_shared<Collect>()).ok());
  GenerationRequest wrong_rows = r;
  wrong_rows.images[0].rows = std::make_shared<const std::vector<float>>(10, 0.0f);
  EXPECT_FALSE(e->Submit(wrong_rows, std::make_shared<Collect>()).ok());
}

TEST(EngineImages, PlaceholderIdsLieInTheRangeTheModelReserves) {
  static_assert(vision::kImageTokenBase == model::kImageTokenBase);
  for (int32_t id : vision::ImageTokenIds(Digest256{}, 50)) EXPECT_TRUE(model::IsImageTokenId(id));
}

TEST(EngineImages, CheckpointHintsLandAtTheImageStartAndAfterItsEnd) {
  GenerationRequest r;
  r.prompt.assign(50, 1);
  PromptImage img;
  img.start = 10;
  img.nx = 4;
  img.ny = 5;
  r.images.push_back(img);
  r.checkpoint_hints = {40, 10};
  AddImageCheckpointHints(r);
  EXPECT_EQ(r.checkpoint_hints, (std::vector<int32_t>{10, 31, 40}));
}

}  // namespace
}  // namespace rw::engine
