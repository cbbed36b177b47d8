// Server-side counters, exposed at GET /metrics in Prometheus text format before the engine's own metrics.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace rw::server {

class ServerMetrics {
 public:
  void CountRequest(const std::string& route, int status);
  void CountGeneration(int64_t prompt, int64_t cached, int64_t evaluated, int64_t generated, double seconds);
  void CountDisconnect() { disconnects_.fetch_add(1); }
  void CountStreamed() { streamed_.fetch_add(1); }
  void RequestStarted() { active_.fetch_add(1); }
  void RequestFinished() { active_.fetch_sub(1); }
  // A response's last event waited `seconds` for its end state to be on disk; timed_out: sent without it.
  void CountDiskWait(double seconds, bool timed_out);

  // Prometheus text exposition (HELP/TYPE lines, rewind_server_* names).
  std::string Text() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (route, status) -> count
  std::atomic<int64_t> active_{0}, disconnects_{0}, streamed_{0};
  int64_t prompt_ = 0, cached_ = 0, evaluated_ = 0, generated_ = 0, generations_ = 0;
  double generation_seconds_ = 0;
  int64_t disk_waits_ = 0, disk_wait_timeouts_ = 0;
  double disk_wait_seconds_ = 0, disk_wait_max_seconds_ = 0;
};

}  // namespace rw::server
