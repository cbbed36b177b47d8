// Test helpers: a RequestSink that records the streamed tokens and waits for the request to finish, and a greedy
// request through it.
#pragma once

#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/engine.h"

namespace rw::engine::testing {

class Collect : public RequestSink {
 public:
  bool OnToken(const TokenEvent& e) override {
    std::lock_guard<std::mutex> l(mu);
    tokens.push_back(e.token);
    logprobs.push_back(e.logprob);
    return true;
  }
  void OnDone(const Completion& c) override {
    std::lock_guard<std::mutex> l(mu);
    done = c;
    finished = true;
    cv.notify_all();
  }
  void Wait() {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return finished; });
  }
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  Completion done;
};

// Submits a greedy request (temperature 0, logprobs, ignore_eos) of n tokens with the given checkpoint hints and
// waits for it; a failed submit or an error completion fails the calling test.
inline std::shared_ptr<Collect> AskGreedy(Engine& e, const std::vector<int32_t>& prompt,
                                          std::vector<int32_t> hints, int n = 6) {
  GenerationRequest r;
  r.prompt = prompt;
  r.checkpoint_hints = std::move(hints);
  r.max_tokens = n;
  r.sampling.temperature = 0;
  r.logprobs = true;
  r.ignore_eos = true;
  auto sink = std::make_shared<Collect>();
  EXPECT_TRUE(e.Submit(r, sink).ok());
  sink->Wait();
  EXPECT_FALSE(sink->done.error.has_value()) << sink->done.error->ToString();
  return sink;
}

}  // namespace rw::engine::testing
