// Late system messages (chat/late_system.h) with the Qwen3.5 template, which refuses them, and a template that
// takes them as they are.
#include "chat/late_system.h"

#include <gtest/gtest.h>

#include <string>

#include "base/file.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

Template Qwen35() {
  auto src = ReadFileToString(std::string(REWIND_TEST_DATA) + "/chat/qwen3.5.jinja");
  EXPECT_TRUE(src.ok());
  auto t = Template::Parse(src.ok() ? *src : "");
  EXPECT_TRUE(t.ok());
  return *t;
}

Json Msg(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

TEST(LateSystem, QwenRendersAMidConversationSystemMessageAsAUserBlockInPlace) {
  Template t = Qwen35();
  Json msgs = {Msg("system", "Be brief."), Msg("user", "hi"),
               {{"role", "system"}, {"content", {{{"type", "text"}, {"text", "# Environment"}}}}}};
  RenderOptions o;
  ASSERT_FALSE(RenderChat(t, msgs, nullptr, o).ok());  // the template's own refusal
  auto r = RenderChatAcceptingLateSystem(t, msgs, nullptr, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_NE(r->text.find("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
                         "<|im_start|>user\n<system>\n# Environment\n</system><|im_end|>\n"),
            std::string::npos)
      << r->text;
  ASSERT_EQ(r->spans.message_start.size(), 3u);  // one span per message, as sent
  EXPECT_EQ(r->text.substr(r->spans.message_start[2], 26), "<|im_start|>user\n<system>\n");
}

TEST(LateSystem, AnEarlierTurnRendersTheSameBytesWhenALaterTurnAddsASystemMessage) {
  Template t = Qwen35();
  Json turn1 = {Msg("system", "S"), Msg("user", "list files"), Msg("assistant", "a.txt b.txt")};
  Json turn2 = turn1;
  turn2.push_back(Msg("system", "The date changed."));
  turn2.push_back(Msg("user", "and now?"));
  Json turn3 = turn2;
  turn3.push_back(Msg("assistant", "same"));
  turn3.push_back(Msg("user", "thanks"));
  RenderOptions whole;
  whole.add_generation_prompt = false;
  auto r1 = RenderChatAcceptingLateSystem(t, turn1, nullptr, whole);
  auto r2 = RenderChatAcceptingLateSystem(t, turn2, nullptr, RenderOptions{});
  auto r2_whole = RenderChatAcceptingLateSystem(t, turn2, nullptr, whole);
  auto r3 = RenderChatAcceptingLateSystem(t, turn3, nullptr, RenderOptions{});
  ASSERT_TRUE(r1.ok() && r2.ok() && r2_whole.ok() && r3.ok());
  EXPECT_EQ(r2->text.rfind(r1->text, 0), 0u) << r1->text << "\n----\n" << r2->text;
  EXPECT_EQ(r3->text.rfind(r2_whole->text, 0), 0u) << r2_whole->text << "\n----\n" << r3->text;
}

TEST(LateSystem, ATemplateThatTakesLateSystemMessagesGetsThemUnchanged) {
  auto t = Template::Parse("{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}");
  ASSERT_TRUE(t.ok());
  Json msgs = {Msg("user", "a"), Msg("system", "b")};
  auto r = RenderChatAcceptingLateSystem(*t, msgs, nullptr, RenderOptions{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->text, "[user:a][system:b]");
}

TEST(LateSystem, OnlyLaterSystemMessagesChangeAndOtherErrorsStay) {
  Json msgs = {Msg("system", "first"), Msg("user", "u"), Msg("system", "late")};
  EXPECT_FALSE(HasLateSystemMessage(Json::array({Msg("system", "s"), Msg("user", "u")})));
  EXPECT_TRUE(HasLateSystemMessage(msgs));
  Json in = InlineLateSystemMessages(msgs);
  EXPECT_EQ(in[0], msgs[0]);
  EXPECT_EQ(in[1], msgs[1]);
  EXPECT_EQ(in[2], Msg("user", "<system>\nlate\n</system>"));
  // An error that is not about system messages is still reported (the template's own message).
  auto t = Template::Parse("{{ raise_exception('Nope.') }}");
  ASSERT_TRUE(t.ok());
  auto r = RenderChatAcceptingLateSystem(*t, msgs, nullptr, RenderOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "Nope.");
}

}  // namespace
}  // namespace rw::chat
