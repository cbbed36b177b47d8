#include "server/testing/fake_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace rw::server::testing {

using json = nlohmann::ordered_json;

namespace {

const char* const kSpecialText[] = {"<|im_start|>", "<|im_end|>",  "<think>",
                                    "</think>",     "<tool_call>", "</tool_call>"};

std::string ContentText(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const auto& p : content) out += p.value("text", "");
  }
  return out;
}

}  // namespace

std::vector<int32_t> FakeCodec::Encode(std::string_view text, bool parse_special, bool) const {
  std::vector<int32_t> out;
  size_t i = 0;
  while (i < text.size()) {
    bool matched = false;
    for (int32_t s = 0; s < 6; ++s) {
      bool control = s < 2;
      if (control && !parse_special) continue;
      std::string_view t = kSpecialText[s];
      if (text.substr(i, t.size()) == t) {
        out.push_back(kImStart + s);
        i += t.size();
        matched = true;
        break;
      }
    }
    if (!matched) out.push_back(static_cast<unsigned char>(text[i++]));
  }
  return out;
}

std::string FakeCodec::TokenToPiece(int32_t token, bool special) const {
  if (token >= 0 && token < 256) return std::string(1, static_cast<char>(token));
  if (token >= kImStart && token < kVocab) {
    if (token <= kImEnd && !special) return "";
    return kSpecialText[token - kImStart];
  }
  return "";
}

Expected<RenderedChat> FakeChat::Render(const json& messages, const json& tools,
                                        const ChatOptions& options) const {
  RenderedChat r;
  // As Qwen3.5's template does (the demo model's): an empty conversation is the template's error.
  if (messages.empty()) return Error::InvalidArgument("No messages provided.");
  if (tools.is_array()) r.prompt += "<|im_start|>system\n# Tools\n" + tools.dump() + "<|im_end|>\n";
  for (const auto& m : messages) {
    std::string content = ContentText(m["content"]);
    if (content.find("RAISE_EXCEPTION") != std::string::npos) {
      return Error::InvalidArgument(
          "template error: raise_exception: the fake template refuses this message");
    }
    r.message_offsets.push_back(r.prompt.size());
    r.prompt += "<|im_start|>" + m["role"].get<std::string>() + "\n" + content;
    if (m.contains("tool_calls")) r.prompt += "<tool_call>" + m["tool_calls"].dump() + "</tool_call>";
    r.prompt += "<|im_end|>\n";
  }
  r.generation_offset = r.prompt.size();
  if (options.add_generation_prompt) {
    bool thinking =
        !(options.kwargs.contains("enable_thinking") && options.kwargs["enable_thinking"] == false);
    r.prompt +=
        thinking ? "<|im_start|>assistant\n<think>\n" : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
    r.thinking_open = thinking;
  }
  return r;
}

namespace {

// <think>...</think> then content with <tool_call>{"name":..,"arguments":{..}}</tool_call> blocks.
class FakeParser : public OutputParser {
 public:
  FakeParser(bool in_think, bool tools) : in_think_(in_think), tools_(tools) {}

  ParsedDelta Push(std::string_view text) override {
    buf_.append(text);
    ParsedDelta d;
    Drain(&d, false);
    return d;
  }
  ParsedDelta Finish() override {
    ParsedDelta d;
    Drain(&d, true);
    (in_think_ ? d.reasoning : d.content) += buf_;
    buf_.clear();
    return d;
  }

 private:
  static size_t PartialTail(const std::string& s, const std::string& tag) {
    for (size_t k = std::min(tag.size() - 1, s.size()); k > 0; --k) {
      if (s.compare(s.size() - k, k, tag, 0, k) == 0) return k;
    }
    return 0;
  }
  void Drain(ParsedDelta* d, bool final) {
    while (true) {
      if (in_think_) {
        size_t end = buf_.find("</think>");
        if (end == std::string::npos) {
          size_t keep = final ? 0 : PartialTail(buf_, "</think>");
          d->reasoning += buf_.substr(0, buf_.size() - keep);
          buf_.erase(0, buf_.size() - keep);
          return;
        }
        d->reasoning += buf_.substr(0, end);
        buf_.erase(0, end + 8);
        in_think_ = false;
        strip_newlines_ = true;
        continue;
      }
      if (strip_newlines_) {
        size_t n = buf_.find_first_not_of('\n');
        if (n == std::string::npos && !final) {
          buf_.clear();
          return;
        }
        buf_.erase(0, n == std::string::npos ? buf_.size() : n);
        strip_newlines_ = false;
      }
      if (!tools_) {
        d->content += buf_;
        buf_.clear();
        return;
      }
      size_t start = buf_.find("<tool_call>");
      if (start == std::string::npos) {
        size_t keep = final ? 0 : PartialTail(buf_, "<tool_call>");
        d->content += buf_.substr(0, buf_.size() - keep);
        buf_.erase(0, buf_.size() - keep);
        return;
      }
      size_t end = buf_.find("</tool_call>", start);
      if (end == std::string::npos) {
        d->content += buf_.substr(0, start);
        buf_.erase(0, start);
        return;  // wait for the end (Finish flushes it as content)
      }
      d->content += buf_.substr(0, start);
      json call = json::parse(buf_.substr(start + 11, end - start - 11), nullptr, false);
      if (call.is_object() && call.contains("name") && call["name"].is_string()) {
        // Streamed as two fragments (name, then the arguments in two pieces), as a real parser streams.
        int index = n_calls_++;
        std::string args = call.value("arguments", json::object()).dump();
        size_t half = args.size() / 2;
        d->tool_calls.push_back({"call_fake_" + std::to_string(index), call["name"].get<std::string>(),
                                 args.substr(0, half), index});
        d->tool_calls.push_back({"", "", args.substr(half), index});
      }
      buf_.erase(0, end + 12);
      strip_newlines_ = true;  // between parallel calls
    }
  }
  std::string buf_;
  bool in_think_;
  bool tools_;
  bool strip_newlines_ = false;
  int n_calls_ = 0;
};

}  // namespace

std::unique_ptr<OutputParser> FakeChat::NewParser(const RenderedChat& rendered, const json& tools,
                                                 const std::string& reasoning_format) const {
  if (reasoning_format == "none") return std::make_unique<FakeParser>(false, tools.is_array());
  return std::make_unique<FakeParser>(rendered.thinking_open, tools.is_array());
}

FakeEngine::FakeEngine(Options options) : options_(options) {}

FakeEngine::~FakeEngine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (uint64_t id = 1; id < next_id_; ++id) cancelled_.insert(id);
  }
  for (auto& t : threads_) t.join();
}

Expected<uint64_t> FakeEngine::Submit(engine::GenerationRequest request,
                                      std::shared_ptr<engine::RequestSink> sink) {
  if (request.prompt.empty()) return Error::InvalidArgument("empty prompt");
  if (static_cast<int32_t>(request.prompt.size()) >= options_.n_ctx)
    return Error::OutOfRange("prompt too long");
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= FakeCodec::kVocab) return Error::InvalidArgument("bad token id");
  }
  if (request.top_logprobs < 0 || request.top_logprobs > 20)
    return Error::InvalidArgument("bad top_logprobs");
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  last_ = request;
  ++active_;
  ++submitted_;
  threads_.emplace_back(&FakeEngine::Run, this, id, std::move(request), std::move(sink));
  return id;
}

void FakeEngine::Cancel(uint64_t request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_.insert(request_id);
}

void FakeEngine::Run(uint64_t id, engine::GenerationRequest request,
                     std::shared_ptr<engine::RequestSink> sink) {
  auto t0 = std::chrono::steady_clock::now();
  std::string prompt;
  for (int32_t t : request.prompt) prompt += codec_.TokenToPiece(t, true);
  bool thinking = prompt.size() >= 8 && prompt.compare(prompt.size() - 8, 8, "<think>\n") == 0;
  std::string text;
  int delay = options_.token_delay_us;
  bool long_answer = prompt.find("LONG") != std::string::npos;
  if (thinking) text += "Let me think about it.</think>\n\n";
  if (prompt.find("CALL_TOOLS_PARALLEL") != std::string::npos) {
    text += "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>\n"
            "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>";
  } else if (prompt.find("CALL_TOOL") != std::string::npos) {
    text += "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
  } else if (prompt.find("CALL_NAMESPACED") != std::string::npos) {  // a function of a namespace tool
    text += "<tool_call>{\"name\": \"weather__get\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
  } else if (long_answer) {
    for (int i = 0; i < 3000; ++i) text += "word ";
    delay = options_.long_delay_us;
  } else if (prompt.find("UTF8") != std::string::npos) {
    text += "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x98\x80";
  } else if (prompt.find("STOPWORD") != std::string::npos) {
    text += "one two STOP-HERE three";
  } else {
    text += "Hello from the fake engine.";
  }
  std::vector<int32_t> tokens = codec_.Encode(text, true, false);
  if (!request.ignore_eos) tokens.push_back(FakeCodec::kImEnd);

  engine::Completion done;
  done.prompt_tokens = static_cast<int32_t>(request.prompt.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t lcp = 0;
    if (request.cache_prompt) {
      while (lcp < previous_prompt_.size() && lcp < request.prompt.size() &&
             previous_prompt_[lcp] == request.prompt[lcp]) {
        ++lcp;
      }
    }
    lcp = std::min(lcp, request.prompt.size() - 1);
    previous_prompt_ = request.prompt;
    done.cached_tokens = static_cast<int32_t>(lcp);
    done.cache.lcp = static_cast<int32_t>(lcp);
    done.cache.resume_pos = static_cast<int32_t>(lcp);
    done.cache.source = lcp > 0 ? "live" : "none";
    done.cache.extra_tokens = 0;
    done.cache.reason = lcp > 0 ? "fake: live sequence" : "";
  }
  done.prompt_evaluated = done.prompt_tokens - done.cached_tokens;
  done.slot_id = request.slot_id >= 0 ? request.slot_id : 0;
  done.finish_reason = "stop";
  done.persist = options_.persist;
  auto t1 = std::chrono::steady_clock::now();
  int32_t n = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (cancelled_.count(id)) {
        done.finish_reason = "cancelled";
        break;
      }
    }
    if (request.max_tokens >= 0 && n >= request.max_tokens) {
      done.finish_reason = "length";
      break;
    }
    if (request.ignore_eos && i + 1 == tokens.size()) done.finish_reason = "length";
    if (delay > 0) std::this_thread::sleep_for(std::chrono::microseconds(delay));
    engine::TokenEvent e;
    e.token = tokens[i];
    if (request.logprobs) {
      // Deterministic values that are not short decimals, to test exact round-tripping.
      e.logprob = -0.0123456789f * static_cast<float>(i % 7) - 1.0f / 3.0f;
      for (int32_t k = 0; k < request.top_logprobs; ++k) {
        e.top.push_back({k == 0 ? e.token : (e.token + k) % 256, e.logprob - 0.5f * static_cast<float>(k)});
      }
    }
    ++n;
    if (!sink->OnToken(e)) {
      done.finish_reason = "cancelled";
      break;
    }
    if (done.prompt_tokens + n >= options_.n_ctx && i + 1 < tokens.size()) {  // the context is full, as the engine
      done.finish_reason = "length";
      break;
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  done.generated_tokens = n;
  done.prompt_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  done.predicted_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  if (done.finish_reason == "cancelled") ++cancelled_count_;
  sink->OnDone(done);
  {
    std::lock_guard<std::mutex> lock(mu_);
    --active_;
  }
  idle_cv_.notify_all();
}

engine::EngineInfo FakeEngine::Info() const {
  engine::EngineInfo info;
  info.model_name = "fake";
  info.model_path = "/fake/model.gguf";
  info.n_ctx = options_.n_ctx;
  info.n_ctx_train = 2048;
  info.n_vocab = FakeCodec::kVocab;
  info.n_parallel = options_.n_parallel;
  info.eog_tokens = {FakeCodec::kImEnd};
  return info;
}

std::vector<engine::SlotInfo> FakeEngine::Slots() {
  std::vector<engine::SlotInfo> out;
  std::lock_guard<std::mutex> lock(mu_);
  for (int32_t i = 0; i < options_.n_parallel; ++i) {
    out.push_back({i, i < active_.load(), options_.n_ctx,
                   i == 0 ? static_cast<int32_t>(previous_prompt_.size()) : 0, 0});
  }
  return out;
}

Expected<engine::Engine::SlotFileResult> FakeEngine::SaveSlot(int32_t slot, const std::string& filename) {
  if (slot < 0 || slot >= options_.n_parallel) return Error::InvalidArgument("bad slot");
  std::lock_guard<std::mutex> lock(mu_);
  saved_.insert(filename);
  return SlotFileResult{static_cast<int32_t>(previous_prompt_.size()), 1000u + previous_prompt_.size() * 4,
                        1.5};
}

Expected<engine::Engine::SlotFileResult> FakeEngine::RestoreSlot(int32_t slot, const std::string& filename) {
  if (slot < 0 || slot >= options_.n_parallel) return Error::InvalidArgument("bad slot");
  std::lock_guard<std::mutex> lock(mu_);
  if (!saved_.count(filename)) return Error::NotFound("no saved slot file '" + filename + "'");
  return SlotFileResult{static_cast<int32_t>(previous_prompt_.size()), 1000u + previous_prompt_.size() * 4,
                        0.5};
}

Status FakeEngine::EraseSlot(int32_t slot) {
  if (slot < 0 || slot >= options_.n_parallel) return Error::InvalidArgument("bad slot");
  std::lock_guard<std::mutex> lock(mu_);
  previous_prompt_.clear();
  return Status::Ok();
}

std::string FakeEngine::MetricsText() {
  return "# HELP rewind_engine_requests_total Requests submitted to the engine.\n"
         "# TYPE rewind_engine_requests_total counter\n"
         "rewind_engine_requests_total " +
         std::to_string(submitted_.load()) + "\n";
}

std::string FakeEngine::CacheJson() {
  return "{\"nodes\": 1, \"checkpoints\": 0, \"bytes\": {\"ram\": 0, \"disk\": 0}}";
}

engine::GenerationRequest FakeEngine::last_request() {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

bool FakeEngine::WaitIdle(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return idle_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return active_.load() == 0; });
}

}  // namespace rw::server::testing
