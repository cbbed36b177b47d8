#include "server/image_prompt.h"

#include <gtest/gtest.h>

#include "base/hex.h"
#include "gguf/gguf.h"
#include "modelgen/mmproj_gen.h"
#include "vision/image_pipeline.h"
#include "vision/vision_testing.h"

namespace rw::server {
namespace {

using json = nlohmann::ordered_json;

// Bytes as token ids, "<|image_pad|>" as 300.
class PadCodec : public TextCodec {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool, bool) const override {
    std::vector<int32_t> out;
    const std::string_view pad = "<|image_pad|>";
    for (size_t i = 0; i < text.size();) {
      if (text.substr(i, pad.size()) == pad) {
        out.push_back(300);
        i += pad.size();
      } else {
        out.push_back(static_cast<uint8_t>(text[i++]));
      }
    }
    return out;
  }
  std::string TokenToPiece(int32_t t, bool) const override { return std::string(1, static_cast<char>(t)); }
  bool IsEog(int32_t) const override { return false; }
  int32_t VocabSize() const override { return 301; }
};

std::string Base64(const std::vector<uint8_t>& b) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < b.size(); i += 3) {
    uint32_t v = b[i] << 16 | (i + 1 < b.size() ? b[i + 1] << 8 : 0) | (i + 2 < b.size() ? b[i + 2] : 0);
    out += k[(v >> 18) & 63];
    out += k[(v >> 12) & 63];
    out += i + 1 < b.size() ? k[(v >> 6) & 63] : '=';
    out += i + 2 < b.size() ? k[v & 63] : '=';
  }
  return out;
}

std::string DataUri(int w, int h, uint32_t seed = 1) {
  return "data:image/png;base64," + Base64(vision::testing::EncodePng(vision::testing::Pattern(w, h, seed)));
}

std::unique_ptr<vision::ImagePipeline> Pipeline(int max_images = 16) {
  auto cfg = modelgen::MmprojPreset("tiny", 16);
  std::vector<uint8_t> bytes;
  EXPECT_TRUE(modelgen::WriteMmprojBuffer(*cfg, 3, &bytes).ok());
  auto file = gguf::File::FromBuffer(bytes);
  auto mm = vision::Mmproj::FromFile(std::move(*file));
  vision::PipelineOptions opt;
  opt.preprocess.min_tokens = 1;
  opt.limits.max_images = max_images;
  return std::make_unique<vision::ImagePipeline>(std::move(*mm), opt);
}

json Messages(const std::vector<std::string>& urls) {
  json parts = json::array({{{"type", "text"}, {"text", "look"}}});
  for (const auto& u : urls) parts.push_back({{"type", "image"}, {"image_url", {{"url", u}}}});
  return json::array({{{"role", "user"}, {"content", parts}}});
}

TEST(ImageBytesFromUrl, RefusesRemoteUrlsSayingNothingIsFetched) {
  auto r = ImageBytesFromUrl("https://example.com/cat.png", 1 << 20);
  const ApiError* e = std::get_if<ApiError>(&r);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->status, 400);
  EXPECT_NE(e->message.find("not fetched"), std::string::npos);
  EXPECT_TRUE(std::holds_alternative<ApiError>(ImageBytesFromUrl("file:///etc/passwd", 1 << 20)));
  EXPECT_TRUE(std::holds_alternative<ApiError>(ImageBytesFromUrl("data:image/png,rawbytes", 1 << 20)));
  EXPECT_TRUE(std::holds_alternative<ApiError>(ImageBytesFromUrl("data:image/png;base64,@@@", 1 << 20)));
  auto ok = ImageBytesFromUrl("data:image/png;base64,aGk=", 1 << 20);
  ASSERT_TRUE(std::holds_alternative<std::vector<uint8_t>>(ok));
  EXPECT_EQ(std::get<std::vector<uint8_t>>(ok).size(), 2u);
}

TEST(ExpandChatImages, ReplacesEachPlaceholderAndMovesHintsAfterIt) {
  auto pipe = Pipeline();
  PadCodec codec;
  PreparedGeneration p;
  p.prompt = {1, 2, 300, 3, 4};
  p.checkpoint_hints = {1, 2, 3, 4};
  p.generation_start = 4;
  const json msgs = Messages({DataUri(64, 96)});  // 2 x 3 tokens
  ASSERT_FALSE(ExpandChatImages(msgs, codec, pipe.get(), &p).has_value());
  ASSERT_EQ(p.images.size(), 1u);
  EXPECT_EQ(p.images[0].start, 2);
  EXPECT_EQ(p.images[0].nx, 2);
  EXPECT_EQ(p.images[0].ny, 3);
  ASSERT_EQ(p.prompt.size(), 10u);
  for (int i = 2; i < 8; ++i) EXPECT_GE(p.prompt[i], vision::kImageTokenBase);
  EXPECT_EQ(p.prompt[8], 3);
  EXPECT_EQ(p.checkpoint_hints, (std::vector<int32_t>{1, 2, 8, 9}));
  EXPECT_EQ(p.generation_start, 9);
  // The same image again: the same ids (content keyed), from the encoder cache.
  PreparedGeneration q;
  q.prompt = {1, 2, 300, 3, 4};
  ASSERT_FALSE(ExpandChatImages(msgs, codec, pipe.get(), &q).has_value());
  EXPECT_EQ(q.prompt, p.prompt);
  EXPECT_EQ(pipe->cache().hits(), 1u);
}

TEST(ExpandChatImages, RefusesWithoutMmprojTooManyImagesBrokenImagesAndAMissingPlaceholder) {
  PadCodec codec;
  auto err = [&](vision::ImagePipeline* pipe, const json& msgs, std::vector<int32_t> prompt) {
    PreparedGeneration p;
    p.prompt = std::move(prompt);
    auto e = ExpandChatImages(msgs, codec, pipe, &p);
    EXPECT_TRUE(e.has_value());
    return e ? *e : ApiError::Internal("none");
  };
  EXPECT_NE(err(nullptr, Messages({DataUri(32, 32)}), {300}).message.find("--mmproj"), std::string::npos);
  auto one = Pipeline(1);
  EXPECT_NE(err(one.get(), Messages({DataUri(32, 32), DataUri(32, 32)}), {300, 300}).message.find("limit"),
            std::string::npos);
  auto pipe = Pipeline();
  EXPECT_NE(err(pipe.get(), Messages({DataUri(32, 32)}), {1, 2}).message.find("placeholder"), std::string::npos);
  std::string broken = DataUri(32, 32);
  broken.resize(broken.size() / 2);
  EXPECT_EQ(err(pipe.get(), Messages({broken}), {300}).status, 400);
  EXPECT_NE(err(pipe.get(), Messages({"https://x/y.png"}), {300}).message.find("not fetched"), std::string::npos);
  // Text-only requests are untouched.
  PreparedGeneration t;
  t.prompt = {1, 2};
  EXPECT_FALSE(ExpandChatImages(json::array({{{"role", "user"}, {"content", "hi"}}}), codec, nullptr, &t));
}

}  // namespace
}  // namespace rw::server

#include "server/anthropic_convert.h"
#include "server/responses_api.h"
#include "server/responses_store.h"

namespace rw::server {
namespace {

TEST(ImageParts, AnthropicBase64BlocksAndResponsesInputImagesBecomeImageParts) {
  json anth = {{"model", "m"},
               {"max_tokens", 5},
               {"messages",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "image"}, {"source", {{"type", "base64"}, {"media_type", "image/png"}, {"data", "aGk="}}}},
                    {{"type", "text"}, {"text", "what?"}}}}}}}};
  auto a = ParseAnthropicRequest(anth, false);
  ASSERT_TRUE(std::holds_alternative<AnthropicRequest>(a)) << std::get<ApiError>(a).message;
  EXPECT_EQ(ChatImageUrls(std::get<AnthropicRequest>(a).chat.messages),
            (std::vector<std::string>{"data:image/png;base64,aGk="}));
  anth["messages"][0]["content"][0]["source"] = {{"type", "url"}, {"url", "https://x/y.png"}};
  auto refused = ParseAnthropicRequest(anth, false);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_NE(std::get<ApiError>(refused).message.find("not fetched"), std::string::npos);

  ResponseStore store;
  json resp = {{"model", "m"},
               {"input",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "input_text"}, {"text", "see"}},
                    {{"type", "input_image"}, {"image_url", "data:image/jpeg;base64,aGk="}}}}}}}};
  auto r = ParseResponsesRequest(resp, store);
  ASSERT_TRUE(std::holds_alternative<ResponsesRequest>(r)) << std::get<ApiError>(r).message;
  auto chat = ParseChatRequest(std::get<ResponsesRequest>(r).chat_body);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(chat)) << std::get<ApiError>(chat).message;
  EXPECT_EQ(ChatImageUrls(std::get<ChatRequest>(chat).messages),
            (std::vector<std::string>{"data:image/jpeg;base64,aGk="}));
}

TEST(ImageParts, OpenAiImageUrlPartsAreKeptForTheTemplate) {
  json body = {{"messages",
                {{{"role", "user"},
                  {"content",
                   {{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,aGk="}}}},
                    {{"type", "image_url"}, {"image_url", "data:image/png;base64,aGo="}}}}}}}};
  auto chat = ParseChatRequest(body);
  ASSERT_TRUE(std::holds_alternative<ChatRequest>(chat)) << std::get<ApiError>(chat).message;
  const json& parts = std::get<ChatRequest>(chat).messages[0]["content"];
  EXPECT_EQ(parts[0]["type"], "image");
  EXPECT_EQ(ChatImageUrls(std::get<ChatRequest>(chat).messages).size(), 2u);
}

}  // namespace
}  // namespace rw::server
