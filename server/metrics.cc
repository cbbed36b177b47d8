#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

#include "base/prometheus.h"

namespace rw::server {

void ServerMetrics::CountRequest(const std::string& route, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[{route, status}];
}

void ServerMetrics::CountGeneration(int64_t prompt, int64_t cached, int64_t evaluated, int64_t generated,
                                    double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_ += prompt;
  cached_ += cached;
  evaluated_ += evaluated;
  generated_ += generated;
  ++generations_;
  generation_seconds_ += seconds;
}

void ServerMetrics::CountDiskWait(double seconds, bool timed_out) {
  std::lock_guard<std::mutex> lock(mu_);
  ++disk_waits_;
  disk_wait_timeouts_ += timed_out ? 1 : 0;
  disk_wait_seconds_ += seconds;
  disk_wait_max_seconds_ = std::max(disk_wait_max_seconds_, seconds);
}

namespace {
void Counter(std::string* out, const char* name, const char* help, const char* type, double value) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name,
                value);
  out->append(buf);
}
}  // namespace

std::string ServerMetrics::Text() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string out;
  out += "# HELP rewind_server_http_requests_total HTTP requests answered, by route and status.\n";
  out += "# TYPE rewind_server_http_requests_total counter\n";
  for (const auto& [key, count] : requests_) {
    out += "rewind_server_http_requests_total{route=\"" + PromLabelValue(key.first) + "\",status=\"" +
           std::to_string(key.second) + "\"} " + std::to_string(count) + "\n";
  }
  Counter(&out, "rewind_server_requests_active", "Generation requests in flight.", "gauge",
          static_cast<double>(active_.load()));
  Counter(&out, "rewind_server_generations_total", "Finished generation requests.", "counter",
          static_cast<double>(generations_));
  Counter(&out, "rewind_server_streamed_total", "Generation requests answered as a stream.", "counter",
          static_cast<double>(streamed_.load()));
  Counter(&out, "rewind_server_prompt_tokens_total", "Prompt tokens of finished requests.", "counter",
          static_cast<double>(prompt_));
  Counter(&out, "rewind_server_cached_tokens_total", "Prompt tokens reused from the cache.", "counter",
          static_cast<double>(cached_));
  Counter(&out, "rewind_server_evaluated_tokens_total", "Prompt tokens evaluated.", "counter",
          static_cast<double>(evaluated_));
  Counter(&out, "rewind_server_generated_tokens_total", "Tokens generated.", "counter",
          static_cast<double>(generated_));
  Counter(&out, "rewind_server_generation_seconds_total", "Wall time of finished generation requests.",
          "counter", generation_seconds_);
  Counter(&out, "rewind_server_cache_disk_waits_total",
          "Responses whose last event waited for their end state to be on disk (--cache-disk-wait).", "counter",
          static_cast<double>(disk_waits_));
  Counter(&out, "rewind_server_cache_disk_wait_microseconds_total", "Time those waits took.", "counter",
          static_cast<double>(static_cast<int64_t>(disk_wait_seconds_ * 1e6)));
  Counter(&out, "rewind_server_cache_disk_wait_max_microseconds", "The longest of those waits.", "gauge",
          static_cast<double>(static_cast<int64_t>(disk_wait_max_seconds_ * 1e6)));
  Counter(&out, "rewind_server_cache_disk_wait_timeouts_total",
          "Responses sent when --cache-disk-wait passed before their end state was on disk (a crash then loses it).",
          "counter", static_cast<double>(disk_wait_timeouts_));
  Counter(&out, "rewind_server_client_disconnects_total", "Requests cancelled because the client went away.",
          "counter", static_cast<double>(disconnects_.load()));
  return out;
}

}  // namespace rw::server
