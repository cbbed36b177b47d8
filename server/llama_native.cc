// llama-server's own endpoints besides /completion (handlers_generate.cc): GET /props (server properties as
// llama-server reports them; behind the API key, and the model file's name without its folder) and POST
// /props (refused unless started with --props, as llama-server does; with it, llama-server answers success and
// changes nothing, while rewind refuses every property by name, since none can change at run time).
#include "base/version.h"
#include "server/server_impl.h"

namespace rw::server {

using nlohmann::json;

void Server::Impl::HandleProps(const httplib::Request&, httplib::Response& res) {
  GenerationParams d;  // the defaults a request starts from
  const engine::SamplingParams& s = config.sampling_defaults;
  json params = {{"n_predict", config.default_n_predict}, {"temperature", s.temperature}, {"top_k", s.top_k},
                 {"top_p", s.top_p},           {"min_p", s.min_p},             {"stream", d.stream},
                 {"cache_prompt", d.cache_prompt}, {"reasoning_format", config.reasoning_format},
                 {"chat_template_kwargs", config.chat_template_kwargs}};
  SendJson(res, 200,
           {{"default_generation_settings", {{"n_ctx", info.n_ctx}, {"params", params}}},
            {"total_slots", info.n_parallel},
            {"model_alias", config.model_name},
            {"model_path", info.model_path.substr(info.model_path.find_last_of('/') + 1)},
            {"modalities", {{"vision", false}, {"video", false}, {"audio", false}}},
            {"endpoint_slots", config.slots_endpoint},
            {"endpoint_props", config.props_endpoint},
            {"endpoint_metrics", config.metrics_endpoint},
            {"reasoning_budget", config.reasoning_budget},
            {"n_vocab", info.n_vocab},
            {"device", info.device},
            {"draft_device", info.draft_device},
            {"device_memory", {{"total", info.device_memory_total}, {"weights", info.device_weights_bytes},
                               {"kv", info.device_kv_bytes}, {"states", info.device_state_bytes}}},
            {"build_info", std::string("rewind ") + Version() + " (" + GitCommit() + ")"},
            {"webui", config.webui},
            {"is_sleeping", false}});
}

void Server::Impl::HandlePropsUpdate(const httplib::Request& req, httplib::Response& res) {
  if (!config.props_endpoint) {
    return SendError(res, ApiError{501,
                                   "This server does not support changing global properties. Start it with "
                                   "`--props`",
                                   "not_supported_error", "", ""});
  }
  auto body = ParseJsonBody(req.body, parse_options.limits);
  nlohmann::ordered_json* j = nullptr;
  if (!Take(body, res, &j)) return;
  if (!j->empty()) {
    const std::string name = j->begin().key();
    ApiError e = ApiError::Unsupported("property '" + name +
                                           "' cannot be changed at run time; no property can (restart the "
                                           "server with the flag instead)",
                                       name);
    return SendError(res, e);
  }
  SendJson(res, 200, {{"success", true}});  // an empty object asks for no change
}

}  // namespace rw::server
