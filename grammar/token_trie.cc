#include "grammar/token_trie.h"

#include <algorithm>
#include <utility>

namespace rw::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& pieces) : n_vocab_(static_cast<int32_t>(pieces.size())) {
  // Build with per-node child lists, then renumber the nodes depth-first and lay each node's children out
  // contiguously (sorted by byte).
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
  std::vector<uint32_t> order;  // depth-first preorder of the tmp nodes
  order.reserve(tmp.size());
  std::vector<uint32_t> todo = {0};
  while (!todo.empty()) {
    const uint32_t n = todo.back();
    todo.pop_back();
    order.push_back(n);
    auto& ch = tmp[n].children;
    std::sort(ch.begin(), ch.end());
    for (auto it = ch.rbegin(); it != ch.rend(); ++it) todo.push_back(it->second);
  }
  std::vector<uint32_t> renum(tmp.size());
  for (uint32_t i = 0; i < order.size(); ++i) renum[order[i]] = i;
  nodes_.resize(tmp.size());
  for (uint32_t i = 0; i < order.size(); ++i) {
    const Tmp& t = tmp[order[i]];
    nodes_[i].first_child = static_cast<uint32_t>(edges_.size());
    nodes_[i].n_children = static_cast<uint32_t>(t.children.size());
    for (const auto& [b, c] : t.children) edges_.push_back({b, renum[c]});
    nodes_[i].first_token = static_cast<uint32_t>(tokens_.size());
    nodes_[i].n_tokens = static_cast<uint32_t>(t.tokens.size());
    tokens_.insert(tokens_.end(), t.tokens.begin(), t.tokens.end());
  }
  bytes_.assign(nodes_.size(), 0);
  depths_.assign(nodes_.size(), 0);
  sizes_.assign(nodes_.size(), 1);
  for (uint32_t i = 0; i < nodes_.size(); ++i) {
    for (uint32_t e = nodes_[i].first_child; e < nodes_[i].first_child + nodes_[i].n_children; ++e) {
      bytes_[edges_[e].node] = edges_[e].byte;
      depths_[edges_[e].node] = depths_[i] + 1;
    }
    max_depth_ = std::max(max_depth_, depths_[i]);
  }
  // Children come after their parent in preorder, so a backward pass sums the subtrees.
  for (uint32_t i = static_cast<uint32_t>(nodes_.size()); i-- > 0;)
    for (uint32_t e = nodes_[i].first_child; e < nodes_[i].first_child + nodes_[i].n_children; ++e)
      sizes_[i] += sizes_[edges_[e].node];
}

}  // namespace rw::grammar
