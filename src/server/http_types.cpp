#include "server/http_types.h"

namespace deepinfer::server {

const std::string& HttpRequest::header(const std::string& name) const {
  static const std::string kEmpty;
  for (const auto& [key, value] : headers)
    if (key == name) return value;
  return kEmpty;
}

std::string HttpRequest::path() const { return target.substr(0, target.find('?')); }

}  // namespace deepinfer::server
