// Test helper: a RequestSink that records the streamed tokens and waits for the request to finish.
#pragma once

#include <condition_variable>
#include <mutex>
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

}  // namespace rw::engine::testing
