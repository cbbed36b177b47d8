#include "server/text_stream.h"

#include <algorithm>

namespace rw::server {

std::string StopMatcher::Push(std::string_view text) {
  if (stopped_) return {};
  pending_.append(text);
  if (stops_.empty()) {
    std::string out;
    out.swap(pending_);
    return out;
  }
  // Earliest match of any stop string (ties: the longest stop string).
  size_t best = std::string::npos, best_len = 0;
  for (const auto& s : stops_) {
    size_t pos = pending_.find(s);
    if (pos != std::string::npos && (pos < best || (pos == best && s.size() > best_len))) {
      best = pos;
      best_len = s.size();
    }
  }
  if (best != std::string::npos) {
    stopped_ = true;
    matched_ = pending_.substr(best, best_len);
    std::string out = pending_.substr(0, best);
    pending_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of a stop string.
  size_t hold = 0;
  for (const auto& s : stops_) {
    size_t max_k = std::min(s.size() - 1, pending_.size());
    for (size_t k = max_k; k > hold; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        hold = k;
        break;
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopMatcher::Finish() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  pending_.clear();
  return out;
}

size_t Utf8CompletePrefix(std::string_view s) {
  // Look back at most 3 bytes for the lead byte of a trailing sequence.
  size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking
    size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    return back < need ? n - back
                       : n;  // incomplete sequence: hold it; invalid bytes go through (replaced later)
  }
  return n;
}

std::string TextStream::Release(std::string text) {
  utf8_pending_.append(text);
  size_t ok = Utf8CompletePrefix(utf8_pending_);
  std::string out = utf8_pending_.substr(0, ok);
  utf8_pending_.erase(0, ok);
  return out;
}

std::string TextStream::Push(std::string_view piece) { return Release(stop_.Push(piece)); }

std::string TextStream::Finish() {
  std::string out = Release(stop_.Finish());
  out.append(utf8_pending_);
  utf8_pending_.clear();
  return out;
}

}  // namespace rw::server
