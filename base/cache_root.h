// The folder rewind keeps generated and cached files in: $XDG_CACHE_HOME/rewind, else $HOME/.cache/rewind, else
// /tmp/rewind-cache. The demo model and the per-model prompt caches (`--cache-dir auto`) live below it.
#pragma once

#include <string>

namespace rw {

std::string CacheRoot();

}  // namespace rw
