// The built-in web page (docs/webui.md): GET / and GET /webui/<file> serve the files embedded from webui/,
// and GET /cache/tree the prefix tree for its memory view, GET /props the server's settings (llama-server's
// subset). The page is public (it asks for the API key itself); everything it reads from the API is
// authorised as usual.
#include <string>

#include "base/version.h"
#include "server/server_impl.h"
#include "server/webui_assets.h"

namespace rw::server {

namespace {

void SendAsset(const WebAsset& a, httplib::Response& res) {
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  // Everything the page loads comes from this server (no CDN, works offline).
  res.set_header("Content-Security-Policy",
                 "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_content(reinterpret_cast<const char*>(a.data), a.size, a.content_type);
}

}  // namespace

void Server::Impl::WebUiRoutes() {
  for (const WebAsset& a : WebAssets()) {
    std::string name = a.name;
    std::string path = name == "index.html" ? "/" : "/webui/" + name;
    http.Get(path, [&a](const httplib::Request&, httplib::Response& res) { SendAsset(a, res); });
  }
}

void Server::Impl::HandleCacheTree(const httplib::Request&, httplib::Response& res) {
  res.status = 200;
  res.set_content(backend.engine->CacheTreeJson(), "application/json; charset=utf-8");
}

}  // namespace rw::server
