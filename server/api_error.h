// OpenAI-shaped errors: {"error": {"message", "type", "code"}} with the HTTP status that goes with them.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/expected.h"

namespace rw::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type =
      "invalid_request_error";  // invalid_request_error | authentication_error | not_found_error |
                                // server_error | unavailable_error | not_supported_error
  std::string code;             // optional machine-readable code ("" -> null)
  std::string param;            // offending field ("" -> null)

  static ApiError BadRequest(std::string message, std::string param = "");
  static ApiError Unsupported(std::string message, std::string param = "");
  static ApiError NotFound(std::string message);
  static ApiError Unauthorized();
  static ApiError Unavailable(std::string message);
  static ApiError Internal(std::string message);
  static ApiError MethodNotAllowed(std::string message);
  static ApiError ContextExceeded(std::string message);
  // Maps a library error kind to a status and type.
  static ApiError FromError(const Error& error);

  nlohmann::json ToJson() const;
};

// Dumps JSON without ever throwing: invalid UTF-8 in generated text becomes U+FFFD.
std::string DumpJson(const nlohmann::json& j);

}  // namespace rw::server
