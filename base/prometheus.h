// Prometheus text format helpers shared by the server's and the engine's /metrics lines.
#pragma once

#include <string>

namespace rw {

// A label value escaped for the text format: backslash, double quote and newline.
inline std::string PromLabelValue(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o.push_back('\\');
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o.push_back(c);
  }
  return o;
}

}  // namespace rw
