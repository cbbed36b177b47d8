// Incremental grammar matching over bytes (a pushdown automaton in the style of llama.cpp's grammar sampler):
// the state is a set of stacks of grammar positions plus a partly decoded UTF-8 character. Feeding a token's
// bytes advances every stack; an empty set means the text can never match.
//
// AllowedTokens walks a trie of the whole vocabulary, advancing the state one byte per edge and pruning a
// subtree as soon as its prefix is rejected, so a state that allows few tokens costs little. Checking single
// tokens (Accepts) is cheaper still when only the most likely tokens matter (the sampler's top-k path).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"

namespace rw::grammar {

// A byte trie over token texts. Tokens with empty text (control tokens) are left out.
class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& pieces);

  struct Node {
    uint32_t first_child = 0, n_children = 0;  // range in edges_
    uint32_t first_token = 0, n_tokens = 0;    // range in tokens_
  };
  struct Edge {
    uint8_t byte = 0;
    uint32_t node = 0;
  };
  const Node& node(uint32_t i) const { return nodes_[i]; }
  const Edge& edge(uint32_t i) const { return edges_[i]; }
  int32_t token(uint32_t i) const { return tokens_[i]; }
  size_t n_nodes() const { return nodes_.size(); }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  std::vector<Node> nodes_;  // [0] = root
  std::vector<Edge> edges_;  // children of each node, by byte
  std::vector<int32_t> tokens_;
  int32_t n_vocab_ = 0;
};

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Would these bytes, appended to the text so far, still be a prefix of some sentence of the grammar?
  bool Accepts(std::string_view bytes) const;
  // Appends the bytes; returns false (and leaves the state unchanged) if the grammar rejects them.
  bool Advance(std::string_view bytes);
  // The text so far is a complete sentence (an end-of-generation token may follow).
  bool CanEnd() const;
  // Nothing but the end may follow.
  bool MustEnd() const;
  // Appends every trie token the grammar accepts next (in trie order).
  void AllowedTokens(const TokenTrie& trie, std::vector<int32_t>* allowed) const;

  using Stack = std::vector<uint32_t>;  // grammar positions; back() = the next element to match
  struct State {
    std::vector<Stack> stacks;  // sorted, unique; an empty stack = the sentence may end here
    uint32_t partial = 0;       // bits of a partly decoded UTF-8 character
    int8_t remaining = 0;       // its continuation bytes still expected
    int8_t length = 0;          // its length in bytes (2..4; no over-long forms)
  };

 private:
  // Pushes every stack reachable from `s` whose top is a character class (or which is empty) into `out`.
  void Expand(Stack s, std::vector<Stack>* out) const;
  bool FeedByte(const State& in, uint8_t byte, State* out) const;
  // Whether FeedByte would succeed, without building the next state (no allocation): most candidate tokens
  // and trie edges are rejected by this check alone.
  bool ByteOk(const State& st, uint8_t byte) const;
  void AdvanceChar(const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>* out) const;
  bool PartialFeasible(const State& st) const;
  void Walk(const TokenTrie& trie, uint32_t node, const State& st, std::vector<int32_t>* allowed) const;

  std::shared_ptr<const Grammar> g_;
  State state_;
};

}  // namespace rw::grammar
