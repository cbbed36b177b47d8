#include "memory/sequence_resume.h"

#include <algorithm>
#include <vector>

namespace rw::memory {
namespace {

class SequenceAttention : public AttentionStrategy {
 public:
  explicit SequenceAttention(int32_t lcp) : lcp_(lcp) {}
  int32_t Longest(int32_t limit) const override { return std::min(lcp_, limit); }

 private:
  int32_t lcp_;
};

class SequenceRecurrent : public RecurrentStrategy {
 public:
  SequenceRecurrent(const Sequence& seq, const CheckpointTable& ckpts, std::span<const int32_t> candidate,
                    int32_t lcp)
      : seq_(seq), ckpts_(ckpts), lcp_(lcp), hashes_(PrefixHashes(candidate.first(static_cast<size_t>(lcp)))) {}

  ExactState Longest(int32_t limit) const override {
    const int32_t lim = std::min(limit, lcp_);  // positions whose prefix the sequence shares with the candidate
    ExactState best;                            // the zero state at 0
    auto offer = [&](ExactState s) {
      if (s.pos > best.pos) best = s;  // equal positions keep the earlier (preferred) source
    };
    if (seq_.pos() <= lim) offer({seq_.pos(), StateSource::kLive, kNone});
    if (seq_.replay.valid && seq_.spare != kNone) {
      int32_t p = std::min(lim, seq_.replay.start + seq_.replay.len);
      if (p >= seq_.replay.start) offer({p, StateSource::kReplay, kNone});
    }
    for (CheckpointId id : seq_.checkpoints) {
      const Checkpoint& c = ckpts_.Get(id);
      if (c.pos <= lim && c.prefix_hash == hashes_[static_cast<size_t>(c.pos)])
        offer({c.pos, StateSource::kCheckpoint, id});
    }
    return best;
  }

 private:
  const Sequence& seq_;
  const CheckpointTable& ckpts_;
  int32_t lcp_;
  std::vector<uint64_t> hashes_;  // [lcp + 1] prefix hashes of the candidate
};

}  // namespace

Agreement ResumeInSequence(const Sequence& seq, const CheckpointTable& ckpts, std::span<const int32_t> candidate,
                           int32_t limit) {
  int32_t lcp = CommonPrefix(seq.tokens, candidate);
  SequenceAttention attention(lcp);
  SequenceRecurrent recurrent(seq, ckpts, candidate, lcp);
  return Coordinate(attention, recurrent, std::min<int32_t>(limit, static_cast<int32_t>(candidate.size())));
}

}  // namespace rw::memory
