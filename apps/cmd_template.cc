// rewind template: renders a conversation with a chat template, exactly as the server would (no newline
// added). Template errors (including the template's raise_exception) exit 1 with the message on stderr.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "apps/command.h"
#include "base/file.h"
#include "base/flags.h"
#include "chat/chat_render.h"
#include "gguf/gguf.h"

namespace rw::apps {
namespace {

using Json = nlohmann::ordered_json;

Expected<Json> ReadJson(const std::string& path) {
  REWIND_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error::InvalidArgument(path + ": not valid JSON");
  return j;
}

Expected<std::string> GgufTemplate(const std::string& model) {
  REWIND_ASSIGN_OR_RETURN(auto file, gguf::File::Open(model));
  if (!file->Has("tokenizer.chat_template")) return std::string();
  return file->GetString("tokenizer.chat_template");
}

int Template(int argc, char** argv) {
  // Accept "--enable-thinking false" as well as "--enable-thinking=false".
  std::vector<std::string> storage;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--enable-thinking" && i + 1 < argc &&
        (!std::strcmp(argv[i + 1], "true") || !std::strcmp(argv[i + 1], "false"))) {
      a += std::string("=") + argv[++i];
    }
    storage.push_back(a);
  }
  for (auto& s : storage) args.push_back(s.data());

  FlagSet flags("template", "render a conversation with a chat template (prints the prompt exactly)");
  std::string model, template_file, template_file2, messages_file, tools_file, kwargs;
  chat::RenderOptions opt;
  opt.add_generation_prompt = false;
  bool spans = false;
  int bench = 0;
  flags.Add("model", 'm', &model, "GGUF model whose tokenizer.chat_template is used");
  flags.Add("template", 0, &template_file, "Jinja template file (overrides the model's)");
  flags.Add("chat-template-file", 0, &template_file2, "same as --template (llama-server's name)");
  flags.Add("messages", 0, &messages_file,
            "JSON file: an array of messages, or an object with \"messages\" (and \"tools\")");
  flags.Add("tools", 0, &tools_file, "JSON file with the tools array");
  flags.Add("add-generation-prompt", 0, &opt.add_generation_prompt, "append the assistant generation prompt");
  flags.Add("enable-thinking", 0, &opt.enable_thinking, "template variable enable_thinking");
  flags.Add("kwargs", 0, &kwargs, "JSON object of extra template variables (chat_template_kwargs)");
  flags.Add("bos-token", 0, &opt.bos_token, "template variable bos_token");
  flags.Add("eos-token", 0, &opt.eos_token, "template variable eos_token");
  flags.Add("spans", 0, &spans, "also print the message start offsets as JSON on stderr");
  flags.Add("bench", 0, &bench, "render this many more times and print the mean time per render on stderr");
  Status st = flags.Parse(static_cast<int>(args.size()), args.data());
  if (!st.ok()) {
    std::fprintf(stderr, "rewind template: %s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (template_file.empty()) template_file = template_file2;
  if (messages_file.empty() || (model.empty() && template_file.empty())) {
    std::fprintf(stderr, "rewind template: need --messages and one of -m / --template\n%s",
                 flags.Help().c_str());
    return 2;
  }
  auto fail = [](const Error& e) {
    std::fprintf(stderr, "rewind template: %s\n", e.message.c_str());
    return 1;
  };
  std::string gguf_template;
  if (!model.empty() && template_file.empty()) {
    auto t = GgufTemplate(model);
    if (!t.ok()) return fail(t.error());
    gguf_template = *t;
  }
  auto tmpl = chat::SelectTemplate(gguf_template, template_file);
  if (!tmpl.ok()) return fail(tmpl.error());

  auto msgs = ReadJson(messages_file);
  if (!msgs.ok()) return fail(msgs.error());
  Json messages = *msgs, tools = nullptr;
  if (messages.is_object()) {
    if (messages.contains("tools")) tools = messages["tools"];
    Json m = messages.contains("messages") ? messages["messages"] : Json::array();
    messages = std::move(m);
  }
  if (!tools_file.empty()) {
    auto t = ReadJson(tools_file);
    if (!t.ok()) return fail(t.error());
    tools = *t;
  }
  if (!kwargs.empty()) {
    Json k = Json::parse(kwargs, nullptr, false);
    if (!k.is_object()) return fail(Error::InvalidArgument("--kwargs must be a JSON object"));
    opt.chat_template_kwargs = k;
  }
  auto r = chat::RenderChat(*tmpl, messages, tools, opt);
  if (!r.ok()) return fail(r.error());
  std::fwrite(r->text.data(), 1, r->text.size(), stdout);
  std::fflush(stdout);
  if (spans) {
    Json j = {{"message_start", r->spans.message_start},
              {"generation_start", r->spans.generation_start},
              {"exact", r->spans.exact}};
    std::fprintf(stderr, "%s\n", j.dump().c_str());
  }
  if (bench > 0) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < bench; ++i) {
      auto again = chat::RenderChat(*tmpl, messages, tools, opt);
      if (!again.ok()) return fail(again.error());
    }
    double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / bench;
    std::fprintf(stderr, "render: %zu messages, %zu bytes, %.1f us per render (mean of %d)\n",
                 messages.size(), r->text.size(), us, bench);
  }
  return 0;
}

}  // namespace

REWIND_COMMAND("template", "render a conversation with a chat template", Template);

}  // namespace rw::apps
