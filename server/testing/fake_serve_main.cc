// fake_serve: the real HTTP server over the scripted fake engine (server/testing/fake_backend.h), so that the
// e2e suite can run without a model: REWIND_E2E_FAKE=1 tests/e2e/run.sh build/server/fake_serve
#include <csignal>
#include <cstdio>
#include <string>

#include "base/flags.h"
#include "base/log.h"
#include "server/server.h"
#include "server/testing/fake_backend.h"

int main(int argc, char** argv) {
  rw::server::ServerConfig config;
  config.model_name = "fake";
  int token_delay_us = 1000;
  int n_ctx = 4096;
  int n_parallel = 4;
  std::string host = config.host, api_key, alias = config.model_name;
  int port = 8080;
  rw::FlagSet flags("fake_serve", "HTTP server over a scripted fake engine (tests only)");
  flags.Add("host", 0, &host, "address to listen on");
  flags.Add("port", 0, &port, "port (0 = any free port, printed on stdout)");
  flags.Add("api-key", 0, &api_key, "require this API key");
  flags.Add("alias", 'a', &alias, "model name");
  flags.Add("ctx-size", 'c', &n_ctx, "context per slot");
  flags.Add("parallel", 'n', &n_parallel, "slots");
  flags.Add("token-delay-us", 0, &token_delay_us, "delay per generated token");
  auto st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n%s", st.error().message.c_str(), flags.Help().c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  std::signal(SIGPIPE, SIG_IGN);
  config.host = host;
  config.port = port;
  config.api_key = api_key;
  config.model_name = alias;
  rw::server::testing::FakeEngine::Options options;
  options.n_ctx = n_ctx;
  options.n_parallel = n_parallel;
  options.token_delay_us = token_delay_us;
  rw::server::testing::FakeBackend fake(options);
  rw::server::Server server(config);
  auto bound = server.Bind();
  if (!bound.ok()) {
    std::fprintf(stderr, "fake_serve: %s\n", bound.error().message.c_str());
    return 1;
  }
  server.SetBackend(fake.backend());
  std::printf("listening on http://%s:%d\n", host.c_str(), *bound);
  std::fflush(stdout);
  server.Run();
  return 0;
}
