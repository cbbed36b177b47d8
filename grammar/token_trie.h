// A byte trie over the token texts of a whole vocabulary, for the grammar matcher's mask walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rw::grammar {

// Tokens with empty text (control tokens) are left out. Nodes are numbered in depth-first order (children by
// byte), so a walk reads the node, edge and token arrays front to back.
class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& pieces);

  struct Node {
    uint32_t first_child = 0, n_children = 0;  // range in edges_
    uint32_t first_token = 0, n_tokens = 0;    // range in tokens_: the tokens whose text ends here
  };
  struct Edge {
    uint8_t byte = 0;
    uint32_t node = 0;
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  // The depth-first view, for a walk that reads straight through: node i > 0 is entered from its parent (at
  // depth(i) - 1) by byte(i), and its subtree is nodes [i, i + subtree_size(i)).
  uint8_t byte(uint32_t i) const { return bytes_[i]; }
  uint32_t depth(uint32_t i) const { return depths_[i]; }
  uint32_t subtree_size(uint32_t i) const { return sizes_[i]; }
  uint32_t max_depth() const { return max_depth_; }
  const Edge& edge(uint32_t i) const { return edges_[i]; }
  int32_t token(uint32_t i) const { return tokens_[i]; }
  size_t n_nodes() const { return nodes_.size(); }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  std::vector<Node> nodes_;       // [node], [0] = root
  std::vector<Edge> edges_;       // [edge]: the children of each node, by byte
  std::vector<int32_t> tokens_;   // [token slot] -> token id
  std::vector<uint8_t> bytes_;    // [node]: the byte of the edge into it (0 for the root)
  std::vector<uint32_t> depths_;  // [node]: its text's length
  std::vector<uint32_t> sizes_;   // [node]: the number of nodes in its subtree, itself included
  uint32_t max_depth_ = 0;
  int32_t n_vocab_ = 0;
};

}  // namespace rw::grammar
