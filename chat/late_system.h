// System messages after the first message ("late" ones), which coding agents send mid-conversation (Claude Code's
// environment block, Codex's developer messages) and which many templates refuse (Qwen's raise "System message
// must be at the beginning."). RenderChatAcceptingLateSystem renders the conversation as the template wants it
// and, only when the template refuses and the conversation has a late system message, renders it again with each
// late system message turned, in place, into a user message whose content is the system text inside
// <system>...</system>. The first message keeps its role; no message moves, merges or changes count, so message
// spans stay one per message, and a message renders the same whatever comes after it: a system message that
// appears in a later turn changes nothing before it, and the prompt prefix of the earlier turns (what the cache
// holds) stays byte for byte the same (docs/clients.md).
#pragma once

#include <nlohmann/json.hpp>

#include "chat/chat_render.h"

namespace rw::chat {

// Whether a message after the first has role "system".
bool HasLateSystemMessage(const nlohmann::ordered_json& messages);

// `messages` with every system message after the first turned into a user message (text content: the system
// message's text, parts joined, inside <system>\n...\n</system>).
nlohmann::ordered_json InlineLateSystemMessages(const nlohmann::ordered_json& messages);

// RenderChat, then (when it fails and HasLateSystemMessage) RenderChat of InlineLateSystemMessages; the second
// error when both fail.
Expected<RenderedChat> RenderChatAcceptingLateSystem(const Template& tmpl, const nlohmann::ordered_json& messages,
                                                     const nlohmann::ordered_json& tools,
                                                     const RenderOptions& options);

}  // namespace rw::chat
