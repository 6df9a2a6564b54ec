// OpenAI-style API errors. Every request that the server refuses ends as one of
// these, turned into {"error": {"message", "type", "param", "code"}} with the
// matching HTTP status, so no malformed request can reach the engine or crash it.
#pragma once

#include <stdexcept>
#include <string>

namespace deepinfer::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, std::string message, std::string param = "", std::string code = "")
      : std::runtime_error(message), status_(status), param_(std::move(param)), code_(std::move(code)) {}
  int status() const { return status_; }
  const std::string& param() const { return param_; }  // empty: null in the body
  const std::string& code() const { return code_; }    // empty: null in the body

 private:
  int status_;
  std::string param_, code_;
};

// Shorthand for the most common refusal: 400 naming the offending field.
inline ApiError bad_request(std::string message, std::string param = "") {
  return ApiError(400, std::move(message), std::move(param));
}

// OpenAI's error "type" for an HTTP status ("invalid_request_error" for most 4xx).
const char* error_type_for_status(int status);

// The JSON body of an error response.
std::string error_body(int status, const std::string& message, const std::string& param = "",
                       const std::string& code = "");
inline std::string error_body(const ApiError& e) { return error_body(e.status(), e.what(), e.param(), e.code()); }

// "Not Found" for 404 and so on; "Unknown" for statuses the server never sends.
const char* status_reason(int status);

}  // namespace deepinfer::server
