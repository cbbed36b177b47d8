// A response is acknowledged only once its end state is on disk (--cache-disk-wait; docs/checkpoints.md, "Disk
// tier"): on every API that generates, the last event (the body, the final SSE events) waits on the engine's
// PersistTicket, on the HTTP thread, at most the configured time. A timeout is counted and the response sent
// anyway; 0 turns the wait off.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "server/testing/test_server.h"

namespace rw::server {
namespace {

using nlohmann::json;
using testing::TestServer;
using Outcome = engine::PersistTicket::Outcome;

// A ticket the test opens: Wait blocks until then (kVisible) or until its timeout (kTimedOut).
class GateTicket final : public engine::PersistTicket {
 public:
  Outcome Wait(std::chrono::milliseconds timeout) const override {
    std::unique_lock<std::mutex> lock(mu_);
    ++waits_;
    timeouts_.push_back(timeout);
    waiting_ = true;
    cv_.notify_all();
    const bool open = cv_.wait_for(lock, timeout, [&] { return open_; });
    waiting_ = false;
    return open ? Outcome::kVisible : Outcome::kTimedOut;
  }
  int32_t position() const override { return 7; }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  // Blocks until a response waits on the ticket (false after 30 s).
  bool AwaitWaiter() const {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30), [&] { return waiting_; });
  }
  int waits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return waits_;
  }
  std::vector<std::chrono::milliseconds> timeouts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return timeouts_;
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  mutable int waits_ = 0;
  mutable bool waiting_ = false;
  mutable std::vector<std::chrono::milliseconds> timeouts_;
  bool open_ = false;
};

json Messages() { return json::array({{{"role", "user"}, {"content", "hi"}}}); }

// One request per API that generates (and so persists its end state).
std::vector<std::pair<std::string, json>> Apis() {
  return {{"/v1/chat/completions", {{"messages", Messages()}}},
          {"/v1/completions", {{"prompt", "hi"}}},
          {"/completion", {{"prompt", "hi"}}},
          {"/v1/messages", {{"model", "m"}, {"max_tokens", 50}, {"messages", Messages()}}},
          {"/v1/responses", {{"input", "hi"}}}};
}

// The value of one metric line of the server's /metrics text.
double Metric(TestServer& ts, const std::string& name) {
  const std::string text = ts.server().metrics().Text();
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TestServer WithTicket(std::shared_ptr<const engine::PersistTicket> ticket, int64_t wait_ms) {
  testing::FakeEngine::Options o;
  o.persist = std::move(ticket);
  ServerConfig c;
  c.cache_disk_wait_ms = wait_ms;
  return TestServer(o, c);
}

TEST(DiskWait, EveryApiWaitsForTheEndStateAndATimeoutIsCountedAndAnsweredAnyway) {
  auto ticket = std::make_shared<GateTicket>();  // never opened: every wait times out
  TestServer ts = WithTicket(ticket, 20);
  int n = 0;
  for (const auto& [path, body] : Apis()) {
    for (bool stream : {false, true}) {
      json b = body;
      b["stream"] = stream;
      auto r = ts.Post(path, b);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, 200) << path << " " << r->body;
      EXPECT_EQ(ticket->waits(), ++n) << path << (stream ? " streamed" : "");
    }
  }
  for (auto t : ticket->timeouts()) EXPECT_EQ(t.count(), 20);
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_waits_total"), n);
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_wait_timeouts_total"), n);
  EXPECT_GE(Metric(ts, "rewind_server_cache_disk_wait_max_microseconds"), 20000);
}

TEST(DiskWait, ZeroTurnsTheWaitOff) {
  auto ticket = std::make_shared<GateTicket>();
  TestServer ts = WithTicket(ticket, 0);
  for (const auto& [path, body] : Apis()) EXPECT_EQ(ts.Post(path, body)->status, 200) << path;
  EXPECT_EQ(ticket->waits(), 0);
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_waits_total"), 0);
}

TEST(DiskWait, TheStreamsTextGoesOutAtOnceAndItsLastEventAfterTheEndStateIsInPlace) {
  auto ticket = std::make_shared<GateTicket>();
  TestServer ts = WithTicket(ticket, 60000);
  std::mutex mu;
  std::condition_variable cv;
  std::string received;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.headers = {{"Content-Type", "application/json"}};
  req.body = json{{"messages", Messages()}, {"stream", true}}.dump();
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    std::lock_guard<std::mutex> lock(mu);
    received.append(data, n);
    cv.notify_all();
    return true;
  };
  std::thread client([&] {
    auto c = ts.Client();
    auto r = c.send(req);
    EXPECT_TRUE(r);
  });
  ASSERT_TRUE(ticket->AwaitWaiter());
  {  // the answer's text arrives while the response waits; its end does not
    std::unique_lock<std::mutex> lock(mu);
    EXPECT_TRUE(cv.wait_for(lock, std::chrono::seconds(30),
                            [&] { return received.find("fake engine.") != std::string::npos; }));
    EXPECT_EQ(received.find("[DONE]"), std::string::npos);
    EXPECT_EQ(received.find("\"finish_reason\":\"stop\""), std::string::npos);
  }
  ticket->Open();
  client.join();
  EXPECT_NE(received.find("[DONE]"), std::string::npos);
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_waits_total"), 1);
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_wait_timeouts_total"), 0);
}

TEST(DiskWait, ResponsesWithoutATicketDoNotWait) {
  TestServer ts = WithTicket(nullptr, 1000);
  for (const auto& [path, body] : Apis()) EXPECT_EQ(ts.Post(path, body)->status, 200) << path;
  EXPECT_EQ(Metric(ts, "rewind_server_cache_disk_waits_total"), 0);
}

}  // namespace
}  // namespace rw::server
