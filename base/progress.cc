#include "base/progress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/log.h"
#include "base/timer.h"

namespace rw {

namespace {

std::string Amount(double v, const std::string& unit) {
  char buf[64];
  if (unit == "bytes") {
    if (v >= 1024.0 * 1024 * 1024)
      std::snprintf(buf, sizeof buf, "%.2f GiB", v / (1024.0 * 1024 * 1024));
    else
      std::snprintf(buf, sizeof buf, "%.1f MiB", v / (1024.0 * 1024));
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.0f", v);
  return buf;
}

std::string Duration(double s) {
  char buf[32];
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.0f s", std::ceil(s));
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return buf;
}

}  // namespace

Progress::Progress(std::string what, double total, std::string unit, double start, double delay, double every)
    : Progress(std::move(what), total, std::move(unit), start, delay, every, NowSeconds()) {}

Progress::Progress(std::string what, double total, std::string unit, double start, double delay, double every,
                   double now)
    : what_(std::move(what)),
      unit_(std::move(unit)),
      total_(total),
      start_(start),
      delay_(delay),
      every_(every),
      t0_(now) {}

void Progress::Emit(const std::string& line) const {
  if (sink_)
    sink_(line);
  else
    LOG_INFO("%s", line.c_str());
}

std::string Progress::WithUnit(double v) const {
  return unit_ == "bytes" ? Amount(v, unit_) : Amount(v, unit_) + " " + unit_;
}

bool Progress::Update(double done) { return Update(done, NowSeconds()); }

bool Progress::Update(double done, double now) {
  if (now - t0_ < delay_ || (last_ >= 0 && now - last_ < every_)) return false;
  last_ = now;
  logged_ = true;
  Emit(Line(done, now));
  return true;
}

void Progress::Finish(double done) { Finish(done, NowSeconds()); }

void Progress::Finish(double done, double now) {
  if (!logged_) return;
  const double rate = now > t0_ ? (done - start_) / (now - t0_) : 0;
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f s", now - t0_);
  Emit(what_ + ": " + WithUnit(done) + " done in " + secs + " (" + WithUnit(rate) + "/s)");
}

std::string Progress::Line(double done, double now) const {
  const double elapsed = now - t0_;
  const double rate = elapsed > 0 ? (done - start_) / elapsed : 0;
  const double pct = total_ > 0 ? 100.0 * done / total_ : 0;
  std::string line = what_ + ": " + Amount(done, unit_) + " / " + WithUnit(total_);
  char buf[48];
  std::snprintf(buf, sizeof buf, " (%.0f%%)", pct);
  line += buf;
  if (rate > 0) {
    line += ", " + WithUnit(rate) + "/s";
    line += ", ETA " + Duration(std::max(0.0, total_ - done) / rate);
  }
  return line;
}

}  // namespace rw
