#include "server/api_error.h"

#include <utility>

namespace rw::server {

ApiError ApiError::BadRequest(std::string message, std::string param) {
  return {400, std::move(message), "invalid_request_error", "", std::move(param)};
}
ApiError ApiError::Unsupported(std::string message, std::string param) {
  return {400, std::move(message), "not_supported_error", "unsupported", std::move(param)};
}
ApiError ApiError::NotFound(std::string message) {
  return {404, std::move(message), "not_found_error", "", ""};
}
ApiError ApiError::Unauthorized() {
  return {401, "Invalid API Key", "authentication_error", "invalid_api_key", ""};
}
ApiError ApiError::Unavailable(std::string message) {
  return {503, std::move(message), "unavailable_error", "", ""};
}
ApiError ApiError::Internal(std::string message) { return {500, std::move(message), "server_error", "", ""}; }
ApiError ApiError::MethodNotAllowed(std::string message) {
  return {405, std::move(message), "invalid_request_error", "method_not_allowed", ""};
}
ApiError ApiError::ContextExceeded(std::string message) {
  return {400, std::move(message), "invalid_request_error", "context_length_exceeded", "messages"};
}

ApiError ApiError::FromError(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
    case ErrorKind::kCorrupt:
      return BadRequest(error.message);
    case ErrorKind::kOutOfRange:
      return {400, error.message, "invalid_request_error", "context_length_exceeded", ""};
    case ErrorKind::kUnsupported:
      return Unsupported(error.message);
    case ErrorKind::kNotFound:
      return NotFound(error.message);
    case ErrorKind::kUnauthenticated:
      return Unauthorized();
    case ErrorKind::kResourceExhausted:
    case ErrorKind::kUnavailable:
      return Unavailable(error.message);
    case ErrorKind::kCancelled:
      return {499, error.message, "cancelled", "", ""};
    case ErrorKind::kIo:
    case ErrorKind::kInternal:
      break;
  }
  return Internal(error.message);
}

nlohmann::json ApiError::ToJson() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  return {{"error", e}};
}

std::string DumpJson(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace rw::server
