// Health, models, metrics, tokenizer, template, slot and cache endpoints.
#include "server/responses.h"
#include "server/server_impl.h"

namespace rw::server {

using nlohmann::json;

namespace {


}  // namespace

void Server::Impl::HandleHealth(const httplib::Request&, httplib::Response& res) {
  switch (state.load()) {
    case State::kReady:
      return SendJson(res, 200, {{"status", "ok"}});
    case State::kLoading:
      return SendError(res, ApiError::Unavailable("Loading model"));
    case State::kFailed:
      return SendError(res, ApiError::Unavailable("Model failed to load: " + load_error));
  }
}

void Server::Impl::HandleModels(const httplib::Request&, httplib::Response& res) {
  json meta = {{"n_ctx", info.n_ctx},
               {"n_ctx_train", info.n_ctx_train},
               {"n_vocab", info.n_vocab},
               {"n_parallel", info.n_parallel},
               {"path", info.model_path}};
  json model = {{"id", config.model_name},
                {"object", "model"},
                {"created", UnixTime()},
                {"owned_by", "rewind"},
                {"meta", std::move(meta)}};
  SendJson(res, 200, {{"object", "list"}, {"data", json::array({std::move(model)})}});
}

void Server::Impl::HandleMetrics(const httplib::Request&, httplib::Response& res) {
  std::string text = metrics.Text();
  std::string engine_text = backend.engine->MetricsText();
  if (!engine_text.empty() && engine_text.back() != '\n') engine_text.push_back('\n');
  text += engine_text;
  res.status = 200;
  res.set_content(text, "text/plain; version=0.0.4; charset=utf-8");
}

void Server::Impl::HandleTokenize(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseTokenizeRequest(*j);
  TokenizeRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  std::vector<int32_t> tokens = backend.codec->Encode(r->content, r->parse_special, r->add_special);
  json out = json::array();
  for (int32_t t : tokens) {
    if (!r->with_pieces) {
      out.push_back(t);
      continue;
    }
    std::string piece = backend.codec->TokenToPiece(t, true);
    json p;
    if (IsValidUtf8(piece)) {
      p = piece;
    } else {
      p = json::array();
      for (unsigned char c : piece) p.push_back(static_cast<int>(c));
    }
    out.push_back({{"id", t}, {"piece", std::move(p)}});
  }
  SendJson(res, 200, {{"tokens", std::move(out)}});
}

void Server::Impl::HandleDetokenize(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseDetokenizeRequest(*j);
  DetokenizeRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  std::string text;
  int32_t vocab = backend.codec->VocabSize();
  for (int32_t t : r->tokens) {
    if (t < 0 || t >= vocab) {
      return SendError(res, ApiError::BadRequest(
                                "token id " + std::to_string(t) + " is outside the vocabulary", "tokens"));
    }
    text += backend.codec->TokenToPiece(t, true);
  }
  SendJson(res, 200, {{"content", text}});
}

void Server::Impl::HandleApplyTemplate(const httplib::Request& req, httplib::Response& res) {
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  auto parsed = ParseApplyTemplateRequest(*j, parse_options.limits);
  ChatRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  ChatOptions options;
  options.kwargs = r->template_kwargs;
  options.add_generation_prompt = r->add_generation_prompt;
  nlohmann::ordered_json tools = r->tool_choice == "none" ? nlohmann::ordered_json(nullptr) : r->tools;
  auto rendered = backend.chat->Render(r->messages, tools, options);
  if (!rendered.ok()) return SendError(res, ApiError::FromError(rendered.error()));
  SendJson(res, 200, {{"prompt", rendered->prompt}});
}

void Server::Impl::HandleSlots(const httplib::Request&, httplib::Response& res) {
  json out = json::array();
  for (const auto& s : backend.engine->Slots()) {
    out.push_back({{"id", s.id},
                   {"id_task", s.task_id},
                   {"n_ctx", s.n_ctx},
                   {"n_tokens", s.n_tokens},
                   {"is_processing", s.busy}});
  }
  SendJson(res, 200, out);
}

void Server::Impl::HandleSlotAction(const httplib::Request& req, httplib::Response& res) {
  std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : "";
  std::string action = req.has_param("action") ? req.get_param_value("action") : "";
  auto parsed = ParseSlotAction(id, action, req.body);
  SlotActionRequest* r = nullptr;
  if (!Take(parsed, res, &r)) return;
  if (r->slot >= info.n_parallel) {
    return SendError(res, ApiError::BadRequest("invalid slot id " + std::to_string(r->slot) + " (there are " +
                                               std::to_string(info.n_parallel) + " slots)"));
  }
  engine::Engine& e = *backend.engine;
  if (r->action == "erase") {
    int32_t n = 0;
    for (const auto& s : e.Slots()) {
      if (s.id == r->slot) n = s.n_tokens;
    }
    Status st = e.EraseSlot(r->slot);
    if (!st.ok()) return SendError(res, ApiError::FromError(st.error()));
    return SendJson(res, 200, {{"id_slot", r->slot}, {"n_erased", n}});
  }
  bool save = r->action == "save";
  auto result = save ? e.SaveSlot(r->slot, r->filename) : e.RestoreSlot(r->slot, r->filename);
  if (!result.ok()) return SendError(res, ApiError::FromError(result.error()));
  if (save) {
    return SendJson(res, 200,
                    {{"id_slot", r->slot},
                     {"filename", r->filename},
                     {"n_saved", result->n_tokens},
                     {"n_written", result->n_bytes},
                     {"timings", {{"save_ms", result->ms}}}});
  }
  SendJson(res, 200,
           {{"id_slot", r->slot},
            {"filename", r->filename},
            {"n_restored", result->n_tokens},
            {"n_read", result->n_bytes},
            {"timings", {{"restore_ms", result->ms}}}});
}

void Server::Impl::HandleCache(const httplib::Request&, httplib::Response& res) {
  res.status = 200;
  res.set_content(backend.engine->CacheJson(), "application/json; charset=utf-8");
}

}  // namespace rw::server
