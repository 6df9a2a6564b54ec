#include "server/api_error.h"

#include <nlohmann/json.hpp>

namespace deepinfer::server {

const char* error_type_for_status(int status) {
  switch (status) {
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 501: return "not_implemented_error";
    case 503: return "service_unavailable_error";
    default: return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

std::string error_body(int status, const std::string& message, const std::string& param, const std::string& code) {
  nlohmann::json err = {{"message", message},
                        {"type", error_type_for_status(status)},
                        {"param", param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param)},
                        {"code", code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code)}};
  // Messages can quote user input; replace invalid UTF-8 rather than throw while reporting an error.
  return nlohmann::json{{"error", err}}.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

const char* status_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

}  // namespace deepinfer::server
