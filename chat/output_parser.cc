#include "chat/output_parser.h"

#include <algorithm>

#include "chat/text_scan.h"
#include "chat/tool_call_array.h"
#include "chat/tool_call_kimi.h"
#include "chat/tool_call_pythonic.h"

namespace rw::chat {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kThinkOpen = "<think>";
constexpr std::string_view kThinkClose = "</think>";

}  // namespace

Json ParameterValue(const std::string& raw, const Json* schema) {
  std::vector<std::string> types;
  if (schema && schema->is_object() && schema->contains("type")) {
    const Json& t = (*schema)["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    if (t.is_array()) {
      for (const auto& x : t) {
        if (x.is_string()) types.push_back(x.get<std::string>());
      }
    }
  }
  auto has = [&](const char* t) { return std::find(types.begin(), types.end(), t) != types.end(); };
  if (types.empty()) return raw;
  std::string v = Trim(raw);
  if (has("null") && v == "null") return nullptr;
  if (has("string")) return raw;
  if (has("boolean")) {
    if (v == "true" || v == "True") return true;
    if (v == "false" || v == "False") return false;
  }
  Json parsed = Json::parse(v, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_discarded()) {
    if ((has("integer") && (parsed.is_number_integer())) || (has("number") && parsed.is_number()) ||
        (has("boolean") && parsed.is_boolean()) || (has("object") && parsed.is_object()) ||
        (has("array") && parsed.is_array())) {
      return parsed;
    }
    if (has("integer") && parsed.is_number_float() &&
        parsed.get<double>() == static_cast<double>(static_cast<int64_t>(parsed.get<double>()))) {
      return static_cast<int64_t>(parsed.get<double>());
    }
  }
  return raw;
}

OutputParser::OutputParser(ParserOptions options)
    : opt_(std::move(options)), call_open_(TagsOf(opt_.format).open), call_close_(TagsOf(opt_.format).close) {
  if (!opt_.parse_reasoning)
    state_ = State::kContent;
  else
    state_ = opt_.starts_in_reasoning ? State::kReasoning : State::kStart;
}

void OutputParser::FlushPendingWs(ParserDelta* d) {
  if (pending_ws_.empty()) return;
  d->content += pending_ws_;
  message_.content += pending_ws_;
  pending_ws_.clear();
}

void OutputParser::EmitContent(std::string_view s, ParserDelta* d) {
  size_t e = s.size();
  while (e > 0 && IsWs(s[e - 1])) --e;
  if (e == 0) {
    pending_ws_.append(s);
    return;
  }
  std::string out = pending_ws_;
  out.append(s.substr(0, e));
  pending_ws_.assign(s.substr(e));
  d->content += out;
  message_.content += out;
  content_started_ = true;
}

void OutputParser::EmitReasoning(std::string_view s, ParserDelta* d) {
  size_t e = s.size();
  while (e > 0 && IsWs(s[e - 1])) --e;
  if (e == 0) {
    pending_ws_.append(s);
    return;
  }
  std::string out = pending_ws_;
  out.append(s.substr(0, e));
  pending_ws_.assign(s.substr(e));
  d->reasoning += out;
  message_.reasoning_content += out;
  if (opt_.reasoning_in_content) {
    if (!think_tag_in_content_) out.insert(0, kThinkOpen);
    think_tag_in_content_ = true;
    d->content += out;
    message_.content += out;
  }
}

void OutputParser::EndReasoning(bool closed, ParserDelta* d) {
  pending_ws_.clear();
  if (closed && think_tag_in_content_) {
    d->content += kThinkClose;
    message_.content += kThinkClose;
  }
}

void OutputParser::BeginToolCall(size_t tag_at) {
  buf_.erase(0, tag_at + call_open_.size());
  if (opt_.format == ToolCallFormat::kNemotronArray) {
    block_ = std::make_unique<ToolCallArrayParser>(&opt_.tools, message_.tool_calls.size(), call_close_);
  } else if (opt_.format == ToolCallFormat::kLfm2Pythonic) {
    block_ = std::make_unique<PythonicCallsParser>(message_.tool_calls.size(), call_close_);
  } else if (opt_.format == ToolCallFormat::kKimi) {
    block_ = std::make_unique<KimiCallsParser>(message_.tool_calls.size(), call_close_);
  } else {
    block_ = std::make_unique<ToolCallBlockParser>(&opt_.tools, message_.tool_calls.size());
  }
  state_ = State::kToolCall;
}

void OutputParser::TakeCalls(std::vector<ToolCallDelta>& calls, ParserDelta* d) {
  for (auto& c : calls) {
    if (!c.name.empty()) {
      message_.tool_calls.push_back({c.name, c.arguments});
    } else {
      message_.tool_calls[c.index].arguments += c.arguments;
    }
    d->tool_calls.push_back(std::move(c));
  }
}

void OutputParser::Process(bool final, ParserDelta* d) {
  while (true) {
    switch (state_) {
      case State::kStart: {
        size_t i = SkipWs(buf_, 0);
        std::string_view rest = std::string_view(buf_).substr(i);
        if (rest.empty() && !final) return;
        if (StartsWith(rest, kThinkOpen)) {
          buf_.erase(0, i + kThinkOpen.size());
          state_ = State::kReasoning;
          continue;
        }
        if (!final && StartsWith(kThinkOpen, rest)) return;
        state_ = State::kContent;
        continue;
      }
      case State::kReasoning: {
        if (!reasoning_started_) {
          size_t i = SkipWs(buf_, 0);
          std::string_view rest = std::string_view(buf_).substr(i);
          if (rest.empty() && !final) return;
          if (opt_.starts_in_reasoning && !final && StartsWith(kThinkOpen, rest) &&
              rest.size() < kThinkOpen.size()) {
            return;
          }
          if (opt_.starts_in_reasoning && StartsWith(rest, kThinkOpen)) i += kThinkOpen.size();
          buf_.erase(0, SkipWs(buf_, i));
          reasoning_started_ = true;
        }
        size_t close = buf_.find(kThinkClose);
        size_t call = opt_.parse_tool_calls ? buf_.find(call_open_) : std::string::npos;
        if (close != std::string::npos && (call == std::string::npos || close < call)) {
          EmitReasoning(std::string_view(buf_).substr(0, close), d);
          EndReasoning(true, d);
          buf_.erase(0, close + kThinkClose.size());
          state_ = State::kContent;
          content_started_ = false;
          continue;
        }
        if (call != std::string::npos) {
          EmitReasoning(std::string_view(buf_).substr(0, call), d);
          EndReasoning(false, d);
          BeginToolCall(call);
          continue;
        }
        if (final) {
          EmitReasoning(buf_, d);
          EndReasoning(false, d);
          buf_.clear();
          return;
        }
        size_t hold = PartialTagSuffix(buf_, kThinkClose);
        if (opt_.parse_tool_calls) hold = std::max(hold, PartialTagSuffix(buf_, call_open_));
        EmitReasoning(std::string_view(buf_).substr(0, buf_.size() - hold), d);
        buf_.erase(0, buf_.size() - hold);
        return;
      }
      case State::kContent: {
        if (!content_started_) {
          buf_.erase(0, SkipWs(buf_, 0));
          if (buf_.empty()) return;
        }
        size_t call = opt_.parse_tool_calls ? buf_.find(call_open_) : std::string::npos;
        if (call != std::string::npos) {
          EmitContent(std::string_view(buf_).substr(0, call), d);
          ws_before_call_ = std::move(pending_ws_);
          pending_ws_.clear();
          BeginToolCall(call);
          continue;
        }
        size_t hold = (final || !opt_.parse_tool_calls) ? 0 : PartialTagSuffix(buf_, call_open_);
        EmitContent(std::string_view(buf_).substr(0, buf_.size() - hold), d);
        buf_.erase(0, buf_.size() - hold);
        if (final) FlushPendingWs(d);
        return;
      }
      case State::kToolCall: {
        std::vector<ToolCallDelta> calls;
        auto r = block_->Feed(buf_, final, &calls);
        buf_.clear();
        TakeCalls(calls, d);
        if (r == ToolCallBlock::Result::kNeedMore) return;
        if (r == ToolCallBlock::Result::kDone) {
          buf_ = block_->leftover();
          content_started_ = false;
          ws_before_call_.clear();
        } else {
          malformed_ = std::string(call_open_) + block_->text();
          state_ = State::kMalformedCall;
          block_.reset();
          continue;
        }
        block_.reset();
        state_ = State::kContent;
        continue;
      }
      case State::kMalformedCall: {
        // Malformed: the block up to its closing tag is content after all.
        malformed_ += buf_;
        buf_.clear();
        size_t close = malformed_.find(call_close_);
        if (close == std::string::npos && !final) return;
        size_t len = close == std::string::npos ? malformed_.size() : close + call_close_.size();
        std::string text = ws_before_call_ + malformed_.substr(0, len);
        buf_ = malformed_.substr(len);
        malformed_.clear();
        ws_before_call_.clear();
        d->content += text;
        message_.content += text;
        content_started_ = true;
        state_ = State::kContent;
        continue;
      }
    }
  }
}

ParserDelta OutputParser::Feed(std::string_view text) {
  ParserDelta d;
  buf_.append(text);
  Process(false, &d);
  return d;
}

ParserDelta OutputParser::Finish() {
  ParserDelta d;
  Process(true, &d);
  return d;
}

bool PromptEndsInsideThinking(std::string_view prompt) {
  size_t open = prompt.rfind(kThinkOpen);
  if (open == std::string_view::npos) return false;
  size_t close = prompt.rfind(kThinkClose);
  return close == std::string_view::npos || close < open;
}

ParsedMessage ParseOutput(std::string_view text, const ParserOptions& options) {
  OutputParser p(options);
  p.Feed(text);
  p.Finish();
  return p.message();
}

}  // namespace rw::chat
