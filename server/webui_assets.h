// The built-in web page's files (webui/), embedded at build time by webui/embed.cmake.
#pragma once

#include <cstddef>
#include <span>

namespace rw::server {

struct WebAsset {
  const char* name;          // file name under webui/, e.g. "index.html"
  const char* content_type;  // HTTP Content-Type
  const unsigned char* data;
  size_t size;  // bytes
};

std::span<const WebAsset> WebAssets();

}  // namespace rw::server
