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

TEST(LateSystem, ALateSystemMessageChangesNothingBeforeItAndTheNextTurnExtendsThePrompt) {
  Template t = Qwen35();
  Json turn1 = {Msg("system", "S"), Msg("user", "list files"), Msg("assistant", "a.txt b.txt")};
  Json plain = turn1, with_system = turn1;
  plain.push_back(Msg("user", "and now?"));
  with_system.push_back(Msg("system", "The date changed."));
  with_system.push_back(Msg("user", "and now?"));
  auto a = RenderChatAcceptingLateSystem(t, plain, nullptr, RenderOptions{});
  auto b = RenderChatAcceptingLateSystem(t, with_system, nullptr, RenderOptions{});
  ASSERT_TRUE(a.ok() && b.ok());
  // Every byte before the late system message is what the same conversation without it renders.
  const size_t at = b->spans.message_start[3];
  EXPECT_EQ(a->text.substr(0, at), b->text.substr(0, at));
  EXPECT_EQ(a->spans.message_start[3], at);
  // The next turn (a tool call and its result: the same user query) starts with this turn's whole prompt, so
  // the cache resumes at its end.
  Json next = with_system;
  next.push_back({{"role", "assistant"},
                  {"content", ""},
                  {"tool_calls", {{{"type", "function"}, {"function", {{"name", "ls"}, {"arguments", Json::object()}}}}}}});
  next.push_back({{"role", "tool"}, {"content", "a.txt"}});
  auto c = RenderChatAcceptingLateSystem(t, next, nullptr, RenderOptions{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->text.rfind(b->text, 0), 0u) << b->text << "\n----\n" << c->text;
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
