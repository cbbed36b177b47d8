// Progress of long work (model loading, make-model, long prefills): silent for work that ends within `delay`
// seconds, then one log line at most every `every` seconds with done / total, the rate and the time left:
//   "prefill of request 7: 4096 / 16384 tokens (25%), 812 tokens/s, ETA 15 s"
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace rw {

class Progress {
 public:
  // `what` names the work, `unit` its items ("tokens", "bytes": bytes are printed in MiB/GiB). `start` is the
  // amount already done when the work starts (cached tokens), excluded from the rate.
  Progress(std::string what, double total, std::string unit, double start = 0, double delay = 3.0,
           double every = 3.0);
  Progress(std::string what, double total, std::string unit, double start, double delay, double every,
           double now);  // with an explicit start time (tests)

  // Where lines go (default: LOG_INFO).
  void set_sink(std::function<void(const std::string&)> sink) { sink_ = std::move(sink); }

  // Logs a line when one is due. Returns whether it did.
  bool Update(double done);
  bool Update(double done, double now);
  // The work is over: logs a last line ("... done in 12.3 s") if any line was logged before.
  void Finish(double done);
  void Finish(double done, double now);

  // The line for `done` at `now` (public for tests).
  std::string Line(double done, double now) const;
  bool logged() const { return logged_; }

 private:
  std::string WithUnit(double v) const;  // "812 tokens", "1.5 GiB"
  void Emit(const std::string& line) const;
  std::string what_, unit_;
  double total_, start_, delay_, every_, t0_, last_ = -1;
  bool logged_ = false;
  std::function<void(const std::string&)> sink_;
};

}  // namespace rw
