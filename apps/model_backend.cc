#include "apps/model_backend.h"

#include <cstdio>
#include <cstring>

#include "chat/chat_render.h"
#include "chat/late_system.h"
#include "chat/output_parser.h"
#include "chat/tool_format.h"
#include "engine/engine_config.h"
#include "gguf/gguf.h"
#include "modelgen/demo_model.h"
#include "tokenizer/tokenizer.h"

namespace rw::apps {

using server::ChatFormatter;
using server::ChatOptions;
using server::OutputParser;
using server::ParsedDelta;
using server::RenderedChat;
using server::TextCodec;

namespace {

class TokenizerCodec : public TextCodec {
 public:
  explicit TokenizerCodec(std::unique_ptr<tokenizer::Tokenizer> tok) : tok_(std::move(tok)) {}
  std::vector<int32_t> Encode(std::string_view text, bool parse_special, bool add_special) const override {
    return tok_->Encode(text, parse_special, add_special);
  }
  std::string TokenToPiece(int32_t token, bool special) const override {
    return tok_->TokenToPiece(token, special);
  }
  bool IsEog(int32_t token) const override { return tok_->IsEog(token); }
  int32_t VocabSize() const override { return tok_->n_vocab(); }
  const tokenizer::Tokenizer& tokenizer() const { return *tok_; }

 private:
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

class ChatParserAdapter : public OutputParser {
 public:
  explicit ChatParserAdapter(chat::ParserOptions options) : parser_(std::move(options)) {}
  ParsedDelta Push(std::string_view text) override { return Convert(parser_.Feed(text)); }
  ParsedDelta Finish() override { return Convert(parser_.Finish()); }

 private:
  static ParsedDelta Convert(chat::ParserDelta d) {
    ParsedDelta out;
    out.content = std::move(d.content);
    out.reasoning = std::move(d.reasoning);
    for (auto& call : d.tool_calls) {
      out.tool_calls.push_back(
          {"", std::move(call.name), std::move(call.arguments), static_cast<int>(call.index)});
    }
    return out;
  }
  chat::OutputParser parser_;
};

class TemplateChat : public ChatFormatter {
 public:
  TemplateChat(chat::Template tmpl, std::string bos, std::string eos)
      : tmpl_(std::move(tmpl)),
        bos_(std::move(bos)),
        eos_(std::move(eos)),
        format_(chat::DetectToolCallFormat(tmpl_.source())) {}

  Expected<RenderedChat> Render(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                const ChatOptions& options) const override {
    chat::RenderOptions ro;
    ro.add_generation_prompt = options.add_generation_prompt;
    ro.chat_template_kwargs = options.kwargs;
    if (options.kwargs.contains("enable_thinking") && options.kwargs["enable_thinking"].is_boolean()) {
      ro.enable_thinking = options.kwargs["enable_thinking"].get<bool>();
    }
    ro.bos_token = bos_;
    ro.eos_token = eos_;
    auto r = chat::RenderChatAcceptingLateSystem(tmpl_, messages, tools, ro);
    if (!r.ok()) return r.error();
    RenderedChat out;
    out.prompt = std::move(r->text);
    out.message_offsets = r->spans.message_start;
    out.generation_offset = r->spans.generation_start;
    out.tool_format = GrammarFormat(format_);
    // Thinking is open when the generation header opened a <think> block it did not close.
    size_t open = out.prompt.rfind("<think>");
    size_t close = out.prompt.rfind("</think>");
    out.thinking_open = options.add_generation_prompt && open != std::string::npos &&
                        open >= out.generation_offset && (close == std::string::npos || close < open);
    return out;
  }

  std::unique_ptr<OutputParser> NewParser(const RenderedChat& rendered, const nlohmann::ordered_json& tools,
                                          const std::string& reasoning_format) const override {
    chat::ParserOptions po;
    po.parse_reasoning = reasoning_format != "none";
    po.reasoning_in_content = reasoning_format == "deepseek-legacy";
    po.starts_in_reasoning = rendered.thinking_open;
    po.parse_tool_calls = tools.is_array() && !tools.empty();
    po.format = format_;
    if (po.parse_tool_calls) po.tools = tools;
    return std::make_unique<ChatParserAdapter>(std::move(po));
  }

 private:
  static grammar::ToolCallFormat GrammarFormat(chat::ToolCallFormat f) {
    switch (f) {
      case chat::ToolCallFormat::kQwenXml:
        return grammar::ToolCallFormat::kQwenXml;
      case chat::ToolCallFormat::kNemotronArray:
        return grammar::ToolCallFormat::kNemotronArray;
      case chat::ToolCallFormat::kLfm2Pythonic:
        return grammar::ToolCallFormat::kLfm2Pythonic;
      case chat::ToolCallFormat::kKimi:
        return grammar::ToolCallFormat::kKimi;
      case chat::ToolCallFormat::kHermesJson:
        break;
    }
    return grammar::ToolCallFormat::kHermesJson;
  }

  chat::Template tmpl_;
  std::string bos_, eos_;
  chat::ToolCallFormat format_;
};

std::string TokenTextOrEmpty(const tokenizer::Tokenizer& tok, int32_t id) {
  return id >= 0 && tok.IsValid(id) ? tok.TokenText(id) : std::string();
}

}  // namespace

Expected<LoadedModel> LoadModel(const engine::EngineConfig& config, const std::string& chat_template_file) {
  REWIND_RETURN_IF_ERROR(config.Validate());
  LoadedModel m;
  {
    auto file = gguf::File::Open(config.model_path);
    if (!file.ok()) return file.error();
    auto tok = tokenizer::Tokenizer::FromGguf(**file);
    if (!tok.ok()) return tok.error();
    std::string gguf_template;
    if ((*file)->Has("tokenizer.chat_template")) {
      auto t = (*file)->GetString("tokenizer.chat_template");
      if (t.ok()) gguf_template = *t;
    }
    auto tmpl = chat::SelectTemplate(gguf_template, chat_template_file);
    if (!tmpl.ok()) return tmpl.error();
    std::string bos = TokenTextOrEmpty(**tok, (*tok)->bos_id());
    std::string eos = TokenTextOrEmpty(**tok, (*tok)->eos_id());
    m.chat = std::make_unique<TemplateChat>(std::move(*tmpl), bos, eos);
    m.codec = std::make_unique<TokenizerCodec>(std::move(*tok));
  }
  auto engine = engine::CreateEngine(config);
  if (!engine.ok()) return engine.error();
  m.engine = std::move(*engine);
  return m;
}

Expected<std::string> DemoModelPath(const std::string& cache_dir) {
  return modelgen::EnsureDemoModel(cache_dir);
}

int64_t ResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  int64_t kb = 0;
  while (std::fgets(line, sizeof(line), f)) {
    if (std::strncmp(line, "VmRSS:", 6) == 0) {
      kb = std::atoll(line + 6);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace rw::apps
