#include "engine/sampler_penalties.h"

#include <algorithm>
#include <cmath>

namespace rw::engine {

void AdjustLogit(Candidates* c, int32_t token, const std::function<float(float)>& f) {
  if (c->identity) {
    if (token >= 0 && static_cast<size_t>(token) < c->data.size())
      c->data[token].logit = f(c->data[token].logit);
    return;
  }
  for (auto& x : c->data)
    if (x.id == token) x.logit = f(x.logit);
}

Penalties::Penalties(int32_t last_n, float repeat, float frequency, float presence)
    : last_n_(last_n), repeat_(repeat), frequency_(frequency), presence_(presence) {}

void Penalties::Accept(int32_t token) {
  if (last_n_ == 0) return;
  ++count_[token];
  window_.push_back(token);
  if (static_cast<int32_t>(window_.size()) > last_n_) {
    int32_t old = window_.front();
    window_.pop_front();
    if (--count_[old] == 0) count_.erase(old);
  }
}

void Penalties::Apply(Candidates* c) const {
  if (!enabled()) return;
  auto penalise = [&](int32_t count) {
    return [this, count](float logit) {
      // Multiplying negative logits (instead of dividing) keeps a penalty from making a token more likely.
      logit = logit <= 0 ? logit * repeat_ : logit / repeat_;
      return logit - static_cast<float>(count) * frequency_ - (count > 0 ? presence_ : 0.0f);
    };
  };
  if (c->identity) {
    for (const auto& [tok, n] : count_) AdjustLogit(c, tok, penalise(n));
  } else {
    for (auto& x : c->data) {
      auto it = count_.find(x.id);
      if (it != count_.end()) x.logit = penalise(it->second)(x.logit);
    }
  }
  c->sorted = false;
}

namespace {

// Tokens whose text contains `s` (empty tail), and tokens whose text ends with a proper prefix of `s` (tail:
// the tokenisation of the rest), as llama.cpp's DRY preprocessing.
void AddBreaker(const DryVocab& vocab, const std::string& s, size_t max_tail,
                std::unordered_multimap<int32_t, std::vector<int32_t>>* out) {
  const auto& pieces = *vocab.pieces;
  for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
    const std::string& w = pieces[id];
    if (w.find(s) != std::string::npos) {
      out->emplace(id, std::vector<int32_t>());
      continue;
    }
    for (size_t pos = w.find(s[0]); pos != std::string::npos; pos = w.find(s[0], pos + 1)) {
      size_t i = 1;
      bool match = true;
      for (; i < s.size() && pos + i < w.size(); ++i) {
        if (w[pos + i] != s[i]) {
          match = false;
          break;
        }
      }
      if (!match) continue;
      std::vector<int32_t> tail = vocab.encode ? vocab.encode(s.substr(i)) : std::vector<int32_t>();
      if (tail.size() > max_tail) tail.resize(max_tail);
      auto range = out->equal_range(id);
      bool dup = std::any_of(range.first, range.second, [&](const auto& kv) { return kv.second == tail; });
      if (!dup) out->emplace(id, std::move(tail));
    }
  }
}

}  // namespace

std::shared_ptr<const DryBreakers> BuildDryBreakers(const std::vector<std::string>& breakers,
                                                    const DryVocab& vocab) {
  auto out = std::make_shared<DryBreakers>();
  if (vocab.pieces == nullptr) return out;
  for (std::string s : breakers) {
    if (s.empty()) continue;
    if (s.size() > 40) s.resize(40);  // llama.cpp's bound on a breaker's length
    AddBreaker(vocab, s, 20, out.get());
  }
  return out;
}

Dry::Dry(float multiplier, float base, int32_t allowed_length, int32_t last_n,
         std::shared_ptr<const DryBreakers> breakers)
    : multiplier_(multiplier),
      base_(base),
      allowed_length_(allowed_length),
      last_n_(std::max(last_n, 0)),
      breakers_(breakers ? std::move(breakers) : std::make_shared<const DryBreakers>()) {}

void Dry::Accept(int32_t token) {
  if (!enabled()) return;
  last_.push_back(token);
  if (static_cast<int32_t>(last_.size()) > last_n_) last_.pop_front();
}

void Dry::Apply(Candidates* c) {
  if (!enabled()) return;
  const int n = static_cast<int>(last_.size());
  if (n <= allowed_length_) return;
  // rat(i): the i-th token from the end (0 = the last one).
  auto rat = [&](int i) { return last_[static_cast<size_t>(n - 1 - i)]; };
  // 1. The nearest sequence breaker limits how far back a repetition may reach.
  int rep_limit = n;
  for (int i = 0; i < n; ++i) {
    auto range = breakers_->equal_range(rat(i));
    int longest = -1;
    for (auto it = range.first; it != range.second; ++it) {
      const int len = static_cast<int>(it->second.size());
      if (len <= longest || len > i) continue;
      bool match = true;
      for (int k = 0; k < len && match; ++k) match = it->second[k] == rat(i - k - 1);
      if (match) longest = len;
    }
    if (longest >= 0) {
      rep_limit = i - longest;
      break;
    }
  }
  if (rep_limit < allowed_length_) return;
  // 2. repeat_[n-1-k]: how many tokens before position k (from the end) match the suffix of the context
  // (a Z-algorithm over the reversed window, capped at rep_limit).
  repeat_.assign(n, 0);
  const int last = n - 1;
  int lt = 0, rt = 0;
  for (int k = 1; k < n; ++k) {
    if (k > rt) {
      int m = 0;
      while (m + k < n && rat(m) == rat(m + k)) ++m;
      repeat_[last - k] = std::min(m, rep_limit);
      if (m > 0) {
        lt = k;
        rt = k + m - 1;
      }
    } else {
      const int p = k - lt;
      const int right = rt - k + 1;
      if (repeat_[last - p] < right) {
        repeat_[last - k] = std::min(repeat_[last - p], rep_limit);
      } else {
        int i = rt + 1;
        while (i < n && rat(i) == rat(i - k)) ++i;
        repeat_[last - k] = std::min(i - k, rep_limit);
        lt = k;
        rt = i - 1;
      }
    }
  }
  // 3. The token after each repeated stretch would extend it: remember the longest per token.
  max_repeat_.clear();
  for (int i = 0; i < n - 1; ++i) {
    const int len = repeat_[i];
    if (len < allowed_length_) continue;
    const int32_t tok = rat(n - 2 - i);
    auto it = max_repeat_.find(tok);
    if (it == max_repeat_.end() || it->second < len) max_repeat_[tok] = len;
  }
  // 4. Penalise: multiplier * base^(length - allowed), the exponent capped to keep the result finite.
  int max_exp = 0;
  if (base_ > 1.000001f) max_exp = static_cast<int>(88.7228391f / std::log(base_));
  for (const auto& [tok, len] : max_repeat_) {
    auto range = breakers_->equal_range(tok);
    if (std::any_of(range.first, range.second, [](const auto& kv) { return kv.second.empty(); })) continue;
    int e = len - allowed_length_;
    if (max_exp > 0 && e > max_exp) e = max_exp;
    const float penalty = multiplier_ * std::pow(base_, static_cast<float>(e));
    AdjustLogit(c, tok, [penalty](float l) { return l - penalty; });
  }
  c->sorted = false;
}

}  // namespace rw::engine
