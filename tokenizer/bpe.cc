#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

#include "tokenizer/unicode.h"

namespace rw::tokenizer {

int32_t BpeMerger::Intern(std::string_view text) {
  if (auto it = token_ids_->find(text); it != token_ids_->end()) return it->second;
  if (auto it = extra_sym_.find(text); it != extra_sym_.end()) return it->second;
  const int32_t id = n_tokens_ + static_cast<int32_t>(extra_text_.size());
  extra_text_.emplace_back(text);
  extra_sym_.emplace(std::string(text), id);
  return id;
}

Status BpeMerger::Init(const TokenMap* token_ids, const std::vector<std::string>& merges) {
  token_ids_ = token_ids;
  n_tokens_ = 0;
  for (const auto& [text, id] : *token_ids) n_tokens_ = std::max(n_tokens_, id + 1);
  for (int b = 0; b < 256; ++b) byte_sym_[b] = Intern(ByteToUnicodeUtf8(static_cast<uint8_t>(b)));
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string_view m = merges[rank];
    const size_t sp = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (sp == std::string_view::npos) continue;  // llama.cpp pairs it with "", which never matches
    const std::string_view a = m.substr(0, sp), b = m.substr(sp + 1);
    if (b.empty()) continue;
    joined.assign(a);
    joined.append(b);
    const int32_t sa = Intern(a), sb = Intern(b);
    const int32_t sr = Intern(joined);
    merges_.emplace(Key(sa, sb), Merge{static_cast<int32_t>(rank), sr});  // first occurrence wins
  }
  return Status::Ok();
}

void BpeMerger::EmitSymbol(int32_t sym, std::vector<int32_t>* out) const {
  if (sym < n_tokens_) {
    out->push_back(sym);
    return;
  }
  // Not a token (impossible with a consistent vocabulary): llama.cpp emits each byte of the symbol's text looked
  // up as a one-character token, dropping bytes that have none.
  for (char c : extra_text_[sym - n_tokens_]) {
    auto it = token_ids_->find(std::string_view(&c, 1));
    if (it != token_ids_->end()) out->push_back(it->second);
  }
}

// O(n^2) in the worst case, but with the pair ranks cached: fast for the short pieces that dominate text.
void BpeMerger::MergeSmall(std::vector<int32_t>* syms_ptr) const {
  std::vector<int32_t>& syms = *syms_ptr;
  constexpr int32_t kNone = INT32_MAX;
  int32_t ranks[128];    // [n - 1] rank of pair (i, i+1)
  int32_t results[128];  // [n - 1] merged symbol of pair (i, i+1)
  size_t n = syms.size();
  auto look = [&](size_t i) {
    const Merge* m = FindMerge(syms[i], syms[i + 1]);
    ranks[i] = m ? m->rank : kNone;
    results[i] = m ? m->result : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) look(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == kNone) break;
    syms[best] = results[best];
    // Remove symbol best+1 and pair entry best (pair best now refers to (best, best+2 -> best+1)).
    for (size_t i = best + 1; i + 1 < n; ++i) syms[i] = syms[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      results[i] = results[i + 1];
    }
    --n;
    if (best > 0) look(best - 1);
    if (best + 1 < n) look(best);
  }
  syms.resize(n);
}

// Priority-queue merge for long pieces, as llama.cpp does it.
void BpeMerger::MergeLarge(std::vector<int32_t>* syms_ptr) const {
  std::vector<int32_t>& sym = *syms_ptr;
  const int32_t n = static_cast<int32_t>(sym.size());
  std::vector<int32_t> prev(n), next(n);  // [n] linked list over positions; -1 = none
  for (int32_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank, left, lsym, rsym;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto push = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    const int32_t right = next[left];
    if (const Merge* m = FindMerge(sym[left], sym[right])) queue.push({m->rank, left, sym[left], sym[right]});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Cand c = queue.top();
    queue.pop();
    const int32_t right = next[c.left];
    if (sym[c.left] != c.lsym || right < 0 || sym[right] != c.rsym) continue;  // stale
    sym[c.left] = FindMerge(c.lsym, c.rsym)->result;
    sym[right] = -1;
    next[c.left] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.left;
    push(prev[c.left]);
    push(c.left);
  }
  std::vector<int32_t> alive;
  for (int32_t i = 0; i >= 0 && i < n; i = next[i]) alive.push_back(sym[i]);
  sym.swap(alive);
}

void BpeMerger::Encode(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  std::vector<int32_t> syms(piece.size());  // [n_bytes]
  for (size_t i = 0; i < piece.size(); ++i) syms[i] = byte_sym_[static_cast<uint8_t>(piece[i])];
  if (syms.size() <= 128) {
    MergeSmall(&syms);
  } else {
    MergeLarge(&syms);
  }
  for (int32_t s : syms) EmitSymbol(s, out);
}

void BpeMerger::EncodeCached(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.size() > kCacheMaxPieceBytes) {
    Encode(piece, out);
    return;
  }
  std::string key(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out->size();
  Encode(piece, out);
  std::vector<int32_t> ids(out->begin() + static_cast<std::ptrdiff_t>(start), out->end());
  std::lock_guard<std::mutex> lock(cache_mu_);
  if (cache_.size() >= kCacheMaxEntries) cache_.clear();
  cache_.emplace(std::move(key), std::move(ids));
}

}  // namespace rw::tokenizer
