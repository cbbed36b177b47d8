#include "grammar/matcher.h"

#include <algorithm>
#include <utility>

#include "base/check.h"

namespace rw::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  // Build with per-node child lists, then lay the children of each node out contiguously (sorted by byte).
  struct Tmp {
    std::vector<std::pair<uint8_t, uint32_t>> children;
    std::vector<int32_t> tokens;
  };
  std::vector<Tmp> tmp(1);
  for (int32_t id = 0; id < n_vocab_; ++id) {
    const std::string& p = pieces[id];
    if (p.empty()) continue;
    uint32_t n = 0;
    for (unsigned char b : p) {
      auto& ch = tmp[n].children;
      auto it = std::find_if(ch.begin(), ch.end(), [b](const auto& e) { return e.first == b; });
      if (it != ch.end()) {
        n = it->second;
      } else {
        uint32_t next = static_cast<uint32_t>(tmp.size());
        ch.push_back({b, next});
        tmp.emplace_back();
        n = next;
      }
    }
    tmp[n].tokens.push_back(id);
  }
  nodes_.resize(tmp.size());
  for (size_t i = 0; i < tmp.size(); ++i) {
    auto& ch = tmp[i].children;
    std::sort(ch.begin(), ch.end());
    nodes_[i].first_child = static_cast<uint32_t>(edges_.size());
    nodes_[i].n_children = static_cast<uint32_t>(ch.size());
    for (const auto& [b, c] : ch) edges_.push_back({b, c});
    nodes_[i].first_token = static_cast<uint32_t>(tokens_.size());
    nodes_[i].n_tokens = static_cast<uint32_t>(tmp[i].tokens.size());
    tokens_.insert(tokens_.end(), tmp[i].tokens.begin(), tmp[i].tokens.end());
  }
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar) : g_(std::move(grammar)) {
  REWIND_CHECK(g_ != nullptr);
  for (uint32_t a : g_->alts[g_->root]) Expand(Stack{a}, &state_.stacks);
  std::sort(state_.stacks.begin(), state_.stacks.end());
  state_.stacks.erase(std::unique(state_.stacks.begin(), state_.stacks.end()), state_.stacks.end());
}

void Matcher::Expand(Stack s, std::vector<Stack>* out) const {
  while (true) {
    if (s.empty()) {
      out->push_back(std::move(s));
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
        out->push_back(std::move(s));
        return;
      case Op::kRef: {
        s.pop_back();
        if (!g_->EndsAlternative(pos + 1)) s.push_back(pos + 1);
        const auto& alts = g_->alts[e.value];
        for (size_t i = 0; i + 1 < alts.size(); ++i) {
          Stack t = s;
          t.push_back(alts[i]);
          Expand(std::move(t), out);
        }
        s.push_back(alts.back());
        continue;
      }
    }
  }
}

void Matcher::AdvanceChar(const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>* out) const {
  out->clear();
  for (const Stack& s : in) {
    if (s.empty()) continue;
    const uint32_t pos = s.back();
    if (!g_->classes[g_->elements[pos].value].Matches(cp)) continue;
    Stack t(s.begin(), s.end() - 1);
    if (!g_->EndsAlternative(pos + 1)) t.push_back(pos + 1);
    Expand(std::move(t), out);
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
  if (!ByteOk(state_, static_cast<uint8_t>(bytes[0]))) return false;  // the usual rejection, without a copy
  if (bytes.size() == 1) return true;
  // Every byte but the last builds the next state; the last only needs checking.
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
  return true;
}

bool Matcher::CanEnd() const {
  return state_.remaining == 0 &&
         std::any_of(state_.stacks.begin(), state_.stacks.end(), [](const Stack& s) { return s.empty(); });
}

bool Matcher::MustEnd() const { return CanEnd() && state_.stacks.size() == 1; }

void Matcher::Walk(const TokenTrie& trie, uint32_t node, const State& st,
                   std::vector<int32_t>* allowed) const {
  const TokenTrie::Node& n = trie.node(node);
  State next;
  for (uint32_t i = 0; i < n.n_children; ++i) {
    const TokenTrie::Edge& e = trie.edge(n.first_child + i);
    if (!ByteOk(st, e.byte)) continue;
    const TokenTrie::Node& c = trie.node(e.node);
    for (uint32_t t = 0; t < c.n_tokens; ++t) allowed->push_back(trie.token(c.first_token + t));
    // Leaves (most nodes) need no next state.
    if (c.n_children > 0 && FeedByte(st, e.byte, &next)) Walk(trie, e.node, next, allowed);
  }
}

void Matcher::AllowedTokens(const TokenTrie& trie, std::vector<int32_t>* allowed) const {
  Walk(trie, 0, state_, allowed);
}

}  // namespace rw::grammar
