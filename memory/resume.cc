#include "memory/resume.h"

#include <algorithm>

#include "base/check.h"
#include "base/hash.h"

namespace rw::memory {

const char* StateSourceName(StateSource s) {
  switch (s) {
    case StateSource::kZero: return "none";
    case StateSource::kLive: return "live";
    case StateSource::kCheckpoint: return "checkpoint";
    case StateSource::kReplay: return "replay";
  }
  return "none";
}

std::string ResumeReason(int32_t lcp, int32_t resume, StateSource source, int32_t prompt_size) {
  if (lcp == 0) return "no shared prefix";
  if (resume == 0) return "shared prefix of " + std::to_string(lcp) + " tokens but no exact state at or before it";
  std::string what = source == StateSource::kCheckpoint ? "nearest checkpoint"
                     : source == StateSource::kReplay   ? "replay log state"
                                                        : "live state";
  std::string out = what + " at " + std::to_string(resume) + ", LCP at " + std::to_string(lcp);
  if (lcp >= prompt_size) out += " (whole prompt cached; its last token is evaluated again)";
  return out;
}

Agreement Coordinate(const AttentionStrategy& attention, const RecurrentStrategy& recurrent, int32_t limit) {
  REWIND_CHECK(limit >= 0);
  Agreement out;
  int32_t len = limit;
  bool first = true;
  for (;;) {
    int32_t a = attention.Longest(len);
    REWIND_CHECK(a >= 0 && a <= len);
    if (first) out.attention_len = a;
    first = false;
    ExactState s = recurrent.Longest(a);
    REWIND_CHECK(s.pos >= 0 && s.pos <= a);
    if (s.pos == a) {
      out.state = s;
      return out;
    }
    len = s.pos;  // strictly smaller: terminates (position 0 is always served by the zero state)
  }
}

std::vector<uint64_t> PrefixHashes(std::span<const int32_t> tokens) {
  std::vector<uint64_t> h(tokens.size() + 1);
  h[0] = kFnvOffset;
  for (size_t i = 0; i < tokens.size(); ++i) h[i + 1] = HashTokens(tokens.subspan(i, 1), h[i]);
  return h;
}

int32_t CommonPrefix(std::span<const int32_t> a, std::span<const int32_t> b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return static_cast<int32_t>(i);
}

}  // namespace rw::memory
