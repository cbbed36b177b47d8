// OpenAI Responses API request parsing (responses_api.cc): input items -> chat messages and a chat request
// body.
#pragma once

#include <nlohmann/json.hpp>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "server/request_parse.h"
#include "server/responses_store.h"

namespace rw::server {

struct ResponsesRequest {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // the conversation without instructions
  std::string instructions;
  nlohmann::ordered_json chat_body =
      nlohmann::ordered_json::object();  // the chat request to validate and run
  std::string previous_response_id;
  // Qualified name -> (namespace, name) of the functions of namespace tools (server/agent_shapes.h).
  std::map<std::string, std::pair<std::string, std::string>> namespaced;
  std::vector<std::string> ignored_tools;  // hosted tool types not offered to the model
  std::string owner;  // the client the response will belong to (Server::Impl::ClientOf)
  bool stream = false;
  bool store = true;
};

// Never throws; a previous_response_id missing from `store`, or stored by another client than `owner`, is a
// 404 (the same answer: an id does not reveal whether it exists).
ParseResult<ResponsesRequest> ParseResponsesRequest(const nlohmann::ordered_json& body, ResponseStore& store,
                                                    const std::string& owner = "");

}  // namespace rw::server
