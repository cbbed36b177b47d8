// The built-in web page over real HTTP with the fake engine: GET / and its files, --no-webui, the API key.
#include <gtest/gtest.h>

#include <string>

#include "server/testing/test_server.h"
#include "server/webui_assets.h"

namespace rw::server {
namespace {

using testing::TestServer;

TEST(WebUi, RootServesTheEmbeddedPageWithItsModules) {
  TestServer ts;
  auto c = ts.Client();
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_NE(page->body.find("<script type=\"module\" src=\"/webui/app.js\">"), std::string::npos);
  // Only files of this server: no CDN, nothing fetched elsewhere.
  EXPECT_NE(page->get_header_value("Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  size_t total = 0;
  for (const WebAsset& a : WebAssets()) {
    total += a.size;
    if (std::string(a.name) == "index.html") continue;
    auto r = c.Get(("/webui/" + std::string(a.name)).c_str());
    ASSERT_TRUE(r) << a.name;
    EXPECT_EQ(r->status, 200) << a.name;
    EXPECT_EQ(r->body, std::string(reinterpret_cast<const char*>(a.data), a.size)) << a.name;
    EXPECT_EQ(r->body.find("https://"), std::string::npos) << a.name << " refers to another site";
  }
  EXPECT_LT(total, 300u * 1024) << "the page should stay small";
  EXPECT_EQ(c.Get("/webui/missing.js")->status, 404);
}

TEST(WebUi, NoWebuiLeavesRootUnknown) {
  ServerConfig config;
  config.webui = false;
  TestServer ts({}, config);
  auto c = ts.Client();
  EXPECT_EQ(c.Get("/")->status, 404);
  EXPECT_EQ(c.Get("/webui/app.js")->status, 404);
  EXPECT_EQ(c.Get("/health")->status, 200);
}

TEST(WebUi, PageIsPublicButTheCacheTreeNeedsTheApiKey) {
  ServerConfig config;
  config.api_key = "sekret";
  TestServer ts({}, config);
  auto c = ts.Client();
  EXPECT_EQ(c.Get("/")->status, 200);
  EXPECT_EQ(c.Get("/webui/app.js")->status, 200);
  EXPECT_EQ(c.Get("/cache/tree")->status, 401);
  auto ok = c.Get("/cache/tree", {{"Authorization", "Bearer sekret"}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  auto tree = nlohmann::json::parse(ok->body);
  EXPECT_TRUE(tree["nodes"].is_array());
  EXPECT_TRUE(tree["sequences"].is_array());
}

TEST(WebUi, PropsReportsTheModelAndSlots) {
  TestServer ts;
  auto r = ts.Client().Get("/props");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  auto j = nlohmann::json::parse(r->body);
  EXPECT_EQ(j["model_alias"], "test-model");
  EXPECT_GT(j["total_slots"].get<int>(), 0);
  EXPECT_GT(j["default_generation_settings"]["n_ctx"].get<int>(), 0);
  EXPECT_EQ(j["webui"], true);
}

TEST(WebUi, ServesThePageWhileTheModelLoads) {
  TestServer ts({}, {}, /*ready=*/false);
  auto c = ts.Client();
  EXPECT_EQ(c.Get("/")->status, 200);
  EXPECT_EQ(c.Get("/cache/tree")->status, 503);
}

}  // namespace
}  // namespace rw::server
