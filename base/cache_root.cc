#include "base/cache_root.h"

#include <cstdlib>

namespace rw {

std::string CacheRoot() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/rewind";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/rewind";
  return "/tmp/rewind-cache";
}

}  // namespace rw
