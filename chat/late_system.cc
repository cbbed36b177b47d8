#include "chat/late_system.h"

#include <string>

namespace rw::chat {

using Json = nlohmann::ordered_json;

namespace {

bool IsSystem(const Json& m) { return m.is_object() && m.contains("role") && m["role"] == "system"; }

// The text of a content value: a string, or the text of its parts joined by newlines.
std::string ContentText(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (!content.is_array()) return out;
  for (const auto& p : content) {
    if (!p.is_object() || !p.contains("text") || !p["text"].is_string()) continue;
    if (!out.empty()) out += "\n";
    out += p["text"].get<std::string>();
  }
  return out;
}

}  // namespace

bool HasLateSystemMessage(const Json& messages) {
  if (!messages.is_array()) return false;
  for (size_t i = 1; i < messages.size(); ++i) {
    if (IsSystem(messages[i])) return true;
  }
  return false;
}

Json InlineLateSystemMessages(const Json& messages) {
  Json out = messages;
  for (size_t i = 1; i < out.size(); ++i) {
    if (!IsSystem(out[i])) continue;
    const std::string text = ContentText(out[i].contains("content") ? out[i]["content"] : Json());
    out[i] = Json{{"role", "user"}, {"content", "<system>\n" + text + "\n</system>"}};
  }
  return out;
}

Expected<RenderedChat> RenderChatAcceptingLateSystem(const Template& tmpl, const Json& messages, const Json& tools,
                                                     const RenderOptions& options) {
  auto first = RenderChat(tmpl, messages, tools, options);
  if (first.ok() || !HasLateSystemMessage(messages)) return first;
  return RenderChat(tmpl, InlineLateSystemMessages(messages), tools, options);
}

}  // namespace rw::chat
