#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace rw::grammar {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar, size_t memo_states)
    : g_(std::move(grammar)), max_states_(std::clamp<size_t>(memo_states, 1, 32767)) {
  REWIND_CHECK(g_ != nullptr);
  expanded_entries_ = 0;
  for (uint32_t a : g_->alts[g_->root]) Expand(Stack{a}, &state_.stacks);
  if (overflowed_) state_.stacks.clear();
  std::sort(state_.stacks.begin(), state_.stacks.end());
  state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

void Matcher::Expand(Stack s, std::vector<Stack>* out, int depth) const {
  if (depth > kMaxExpandDepth) {
    overflowed_ = true;
    return;
  }
  while (true) {
    if (overflowed_) return;
    if (s.empty()) {
      out->push_back(std::move(s));
      return;
    }
    if (s.size() > kMaxStateEntries / 64) {  // one stack this deep: a rule chain the bound below would miss
      overflowed_ = true;
      return;
    }
    const uint32_t pos = s.back();
    const Element& e = g_->elements[pos];
    switch (e.op) {
      case Op::kEnd:
      case Op::kAlt:
        s.pop_back();  // an empty alternative: continue with what follows the reference
        continue;
      case Op::kClass:
        expanded_entries_ += s.size();
        if (expanded_entries_ > kMaxStateEntries) {
          overflowed_ = true;
          return;
        }
        out->push_back(std::move(s));
        return;
      case Op::kRef: {
        s.pop_back();
        if (!g_->EndsAlternative(pos + 1)) s.push_back(pos + 1);
        const auto& alts = g_->alts[e.value];
        for (size_t i = 0; i + 1 < alts.size(); ++i) {
          Stack t = s;
          t.push_back(alts[i]);
          Expand(std::move(t), out, depth + 1);
        }
        s.push_back(alts.back());
        continue;
      }
    }
  }
}

void Matcher::AdvanceChar(const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>* out) const {
  out->clear();
  expanded_entries_ = 0;
  for (const Stack& s : in) {
    if (s.empty()) continue;
    const uint32_t pos = s.back();
    if (!g_->classes[g_->elements[pos].value].Matches(cp)) continue;
    Stack t(s.begin(), s.end() - 1);
    if (!g_->EndsAlternative(pos + 1)) t.push_back(pos + 1);
    Expand(std::move(t), out);
    if (overflowed_) {
      out->clear();  // cut: nothing matches from here (overflowed() says why)
      return;
    }
  }
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
}

namespace {

// The smallest code point a UTF-8 sequence of n bytes may encode (shorter forms are invalid).
uint32_t MinCodePoint(int n) { return n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000; }

}  // namespace

bool Matcher::PartialFeasible(const State& st) const {
  const int shift = 6 * st.remaining;
  const uint32_t lo = std::max(st.partial << shift, MinCodePoint(st.length));
  const uint32_t hi = std::min((st.partial << shift) | ((1u << shift) - 1), 0x10FFFFu);
  if (lo > hi) return false;
  return std::any_of(st.stacks.begin(), st.stacks.end(), [&](const Stack& s) {
    return !s.empty() && g_->classes[g_->elements[s.back()].value].MatchesSome(lo, hi);
  });
}

bool Matcher::ByteOk(const State& st, uint8_t byte) const {
  auto any_top = [&](auto&& pred) {
    for (const Stack& s : st.stacks)
      if (!s.empty() && pred(g_->classes[g_->elements[s.back()].value])) return true;
    return false;
  };
  auto some_in = [&](uint32_t partial, int remaining, int length) {
    const int shift = 6 * remaining;
    const uint32_t lo = std::max(partial << shift, MinCodePoint(length));
    const uint32_t hi = std::min((partial << shift) | ((1u << shift) - 1), 0x10FFFFu);
    return lo <= hi && any_top([&](const CharClass& c) { return c.MatchesSome(lo, hi); });
  };
  if (st.remaining == 0) {
    if (byte < 0x80) return any_top([&](const CharClass& c) { return c.Matches(byte); });
    const int len = (byte >> 5) == 6 ? 2 : (byte >> 4) == 14 ? 3 : (byte >> 3) == 30 ? 4 : 0;
    return len != 0 && some_in(byte & (0x7Fu >> len), len - 1, len);
  }
  if ((byte & 0xC0) != 0x80) return false;
  const uint32_t cp = (st.partial << 6) | (byte & 0x3Fu);
  if (st.remaining > 1) return some_in(cp, st.remaining - 1, st.length);
  if (cp < MinCodePoint(st.length) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  return any_top([&](const CharClass& c) { return c.Matches(cp); });
}

bool Matcher::FeedByte(const State& in, uint8_t byte, State* out) const {
  if (!ByteOk(in, byte)) return false;
  if (in.remaining == 0) {
    if (byte < 0x80) {
      AdvanceChar(in.stacks, byte, &out->stacks);
      out->partial = 0;
      out->remaining = 0;
      return !out->stacks.empty();
    }
    const int len = (byte >> 5) == 6 ? 2 : (byte >> 4) == 14 ? 3 : (byte >> 3) == 30 ? 4 : 0;
    if (len == 0) return false;  // a continuation byte or an invalid lead byte
    out->stacks = in.stacks;
    out->partial = byte & (0x7Fu >> len);
    out->remaining = static_cast<int8_t>(len - 1);
    out->length = static_cast<int8_t>(len);
    return PartialFeasible(*out);
  }
  if ((byte & 0xC0) != 0x80) return false;
  const uint32_t cp = (in.partial << 6) | (byte & 0x3Fu);
  if (in.remaining == 1) {
    if (cp < MinCodePoint(in.length) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    AdvanceChar(in.stacks, cp, &out->stacks);
    out->partial = 0;
    out->remaining = 0;
    return !out->stacks.empty();
  }
  out->stacks = in.stacks;
  out->partial = cp;
  out->remaining = static_cast<int8_t>(in.remaining - 1);
  out->length = in.length;
  return PartialFeasible(*out);
}

bool Matcher::Accepts(std::string_view bytes) const {
  if (bytes.empty()) return true;
  if (!ByteOk(state_, static_cast<uint8_t>(bytes[0]))) return false;  // the usual rejection, without a lookup
  if (bytes.size() == 1) return true;
  MakeRoom();
  int32_t st = Current();
  for (size_t i = 0; st >= 0 && i < bytes.size(); ++i) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    const int32_t nx = memo_.next[static_cast<size_t>(st) * 256 + b];
    st = nx == kUnknown ? Transition(st, b) : nx;
  }
  if (st != kOverflow) return st != kRejected;
  // The memo is full: every byte but the last builds the next state; the last only needs checking.
  State a = state_, b;
  for (size_t i = 0; i + 1 < bytes.size(); ++i) {
    if (!FeedByte(a, static_cast<uint8_t>(bytes[i]), &b)) return false;
    std::swap(a, b);
  }
  return ByteOk(a, static_cast<uint8_t>(bytes.back()));
}

bool Matcher::Advance(std::string_view bytes) {
  State a = state_, b;
  for (unsigned char c : bytes) {
    if (!FeedByte(a, c, &b)) return false;
    std::swap(a, b);
  }
  state_ = std::move(a);
  current_ = kUnknown;
  return true;
}

bool Matcher::CanEnd() const {
  return state_.remaining == 0 &&
         std::any_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::MustEnd() const { return CanEnd() && state_.stacks.size() == 1; }

template <typename Take>
void Matcher::Walk(const TokenTrie& trie, uint32_t node, const State& st, Take&& take) const {
  const TokenTrie::Node& n = trie.node(node);
  State next;
  for (uint32_t i = 0; i < n.n_children; ++i) {
    const TokenTrie::Edge& e = trie.edge(n.first_child + i);
    if (!ByteOk(st, e.byte)) continue;
    const TokenTrie::Node& c = trie.node(e.node);
    for (uint32_t t = 0; t < c.n_tokens; ++t) take(trie.token(c.first_token + t));
    // Leaves (most nodes) need no next state.
    if (c.n_children > 0 && FeedByte(st, e.byte, &next)) Walk(trie, e.node, next, take);
  }
}

void Matcher::AllowedTokensReference(const TokenTrie& trie, std::vector<int32_t>* allowed) const {
  Walk(trie, 0, state_, [allowed](int32_t t) { allowed->push_back(t); });
}

namespace {

void SetBit(uint64_t* mask, int32_t t) { mask[t >> 6] |= uint64_t{1} << (t & 63); }

}  // namespace

// The memo's key of a state: its stacks and partial character, as bytes. A partial character whose possible
// code points are all valid and which each stack's class accepts all or none of leads to the same states
// whatever its bits (every completion is valid and advances the same stacks): such a state's key holds that
// accept-all-or-none pattern instead of the bits, so the walk meets one state per pattern rather than one per
// prefix of every multi-byte character in the vocabulary.
std::string Matcher::Key(const State& st) const {
  std::string k;
  auto put = [&k](uint32_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof v); };
  // After a whole character `partial` and `length` are leftovers that nothing reads.
  bool uniform = false;
  uint32_t lo = 0, hi = 0;
  if (st.remaining > 0) {
    const int shift = 6 * st.remaining;
    lo = st.partial << shift;
    hi = lo | ((1u << shift) - 1);
    uniform = lo >= MinCodePoint(st.length) && hi <= 0x10FFFF && (hi < 0xD800 || lo > 0xDFFF);
    for (size_t i = 0; uniform && i < st.stacks.size(); ++i) {
      if (st.stacks[i].empty()) continue;
      const CharClass& c = g_->classes[g_->elements[st.stacks[i].back()].value];
      uniform = c.MatchesAll(lo, hi) || !c.MatchesSome(lo, hi);
    }
  }
  put(st.remaining == 0 ? 0u : uniform ? 0xFFFFFFFFu : st.partial);
  put(st.remaining == 0 ? 0u : static_cast<uint32_t>(st.remaining) << 8 | static_cast<uint32_t>(st.length));
  for (const Stack& s : st.stacks) {
    const bool takes = uniform && !s.empty() && g_->classes[g_->elements[s.back()].value].MatchesSome(lo, hi);
    put(static_cast<uint32_t>(s.size()) | (takes ? 0x80000000u : 0u));
    for (uint32_t p : s) put(p);
  }
  return k;
}

void Matcher::MakeRoom() const {
  if (memo_.states.size() * 4 < max_states_ * 3) return;
  const TokenTrie* trie = memo_.trie;
  memo_ = Memo{};
  memo_.trie = trie;
  current_ = kUnknown;
}

int32_t Matcher::Intern(const State& st) const {
  std::string k = Key(st);
  auto it = memo_.ids.find(k);
  if (it != memo_.ids.end()) return it->second;
  if (memo_.states.size() >= max_states_) return kOverflow;
  const int32_t id = static_cast<int32_t>(memo_.states.size());
  memo_.ids.emplace(std::move(k), id);
  memo_.states.push_back(st);
  memo_.next.resize(memo_.next.size() + 256, kUnknown);
  return id;
}

int32_t Matcher::Current() const {
  if (current_ == kUnknown) current_ = Intern(state_);
  return current_;
}

int32_t Matcher::Transition(int32_t st, uint8_t byte) const {
  State out;
  // (Intern may grow `states`: the reference is not used after it.)
  const int32_t r = FeedByte(memo_.states[st], byte, &out) ? Intern(out) : kRejected;
  if (r != kOverflow) memo_.next[static_cast<size_t>(st) * 256 + byte] = static_cast<int16_t>(r);
  return r;
}

void Matcher::WalkMemo(const TokenTrie& trie, int32_t start, uint64_t* mask) const {
  // Straight through the nodes in depth-first order, with the state at each depth of the current path.
  std::vector<int32_t>& at = walk_states_;  // [depth]
  at.assign(trie.max_depth() + 1, start);
  const uint32_t n = static_cast<uint32_t>(trie.n_nodes());
  for (uint32_t i = 1; i < n;) {
    const uint32_t d = trie.depth(i);
    const int32_t st = at[d - 1];
    const uint8_t b = trie.byte(i);
    int32_t nx = memo_.next[static_cast<size_t>(st) * 256 + b];
    if (nx == kUnknown) nx = Transition(st, b);
    if (nx == kRejected) {
      i += trie.subtree_size(i);
      continue;
    }
    const TokenTrie::Node& c = trie.node(i);
    for (uint32_t t = 0; t < c.n_tokens; ++t) SetBit(mask, trie.token(c.first_token + t));
    if (nx >= 0) {
      at[d] = nx;
      ++i;
      continue;
    }
    // The memo is full: this subtree the plain way.
    State next;
    REWIND_CHECK(FeedByte(memo_.states[st], b, &next));
    Walk(trie, i, next, [mask](int32_t t) { SetBit(mask, t); });
    i += trie.subtree_size(i);
  }
}

void Matcher::AllowedMask(const TokenTrie& trie, std::vector<uint64_t>* mask) const {
  MakeRoom();
  if (memo_.trie != &trie) {
    memo_.masks.clear();
    memo_.trie = &trie;
  }
  const size_t words = (static_cast<size_t>(trie.n_vocab()) + 63) / 64;
  const int32_t st = Current();
  if (st < 0) {  // the memo is full even after MakeRoom (a start state it cannot hold)
    mask->assign(words, 0);
    Walk(trie, 0, state_, [m = mask->data()](int32_t t) { SetBit(m, t); });
    return;
  }
  for (const auto& [start, cached] : memo_.masks) {
    if (start == st) {
      *mask = cached;
      return;
    }
  }
  mask->assign(words, 0);
  WalkMemo(trie, st, mask->data());
  if (memo_.masks.size() < kMaxMasks) {
    memo_.masks.emplace_back(st, *mask);
  } else {
    memo_.masks[memo_.next_mask] = {st, *mask};
    memo_.next_mask = (memo_.next_mask + 1) % kMaxMasks;
  }
}

void Matcher::AllowedTokens(const TokenTrie& trie, std::vector<int32_t>* allowed) const {
  std::vector<uint64_t> mask;
  AllowedMask(trie, &mask);
  for (size_t w = 0; w < mask.size(); ++w)
    for (uint64_t bits = mask[w]; bits != 0; bits &= bits - 1)
      allowed->push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
}

}  // namespace rw::grammar
