// Incremental grammar matching over bytes (a pushdown automaton in the style of llama.cpp's grammar sampler):
// the state is a set of stacks of grammar positions plus a partly decoded UTF-8 character. Feeding a token's
// bytes advances every stack; an empty set means the text can never match.
//
// AllowedMask walks a trie of the whole vocabulary, advancing the state one byte per edge and pruning a
// subtree as soon as its prefix is rejected, so a state that allows few tokens costs little. Checking single
// tokens (Accepts) is cheaper still when only the most likely tokens matter (the sampler's top-k path).
//
// Both run over a memo: the states they meet are numbered and each (state, byte) transition is computed once,
// so a walk costs a table lookup per trie edge, and the masks of the last few start states are kept (inside
// an unbounded JSON string every character leads back to the same state). The memo is a cache of pure
// functions of the grammar: results are exactly those of the plain walk (AllowedTokensReference), and it is
// bounded (cleared when full, and a walk that meets too many states finishes that subtree without it). A
// Matcher is used by one thread at a time, const calls included.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/token_trie.h"

namespace rw::grammar {

class Matcher {
 public:
  static constexpr size_t kMaxStates = 4096;  // the memo's default bound: 2 MiB of transitions
  // Bounds on one state, whatever the grammar: the stacks' entries summed (4 bytes each), and how deep one
  // expansion may nest rules. A grammar can make a state grow with the square of its size (a chain of rules each
  // starting with the next); past a bound the state is cut to nothing (the text is rejected from there on) and
  // overflowed() tells why. The server refuses a grammar whose initial state overflows.
  static constexpr size_t kMaxStateEntries = size_t{1} << 21;
  static constexpr int kMaxExpandDepth = 2048;

  // `memo_states` bounds the memo (at most 32767; tests set it small to exercise the walk without it).
  explicit Matcher(std::shared_ptr<const Grammar> grammar, size_t memo_states = kMaxStates);

  // Would these bytes, appended to the text so far, still be a prefix of some sentence of the grammar?
  bool Accepts(std::string_view bytes) const;
  // Appends the bytes; returns false (and leaves the state unchanged) if the grammar rejects them.
  bool Advance(std::string_view bytes);
  // The text so far is a complete sentence (an end-of-generation token may follow).
  bool CanEnd() const;
  // Nothing but the end may follow.
  bool MustEnd() const;
  // A state grew past kMaxStateEntries or kMaxExpandDepth (then it was cut to nothing).
  bool overflowed() const { return overflowed_; }
  // Sets to 1 exactly the bits of the trie tokens the grammar accepts next: `mask` becomes
  // [ceil(trie.n_vocab() / 64)] words, token t at bit t % 64 of word t / 64.
  void AllowedMask(const TokenTrie& trie, std::vector<uint64_t>* mask) const;
  // Appends every trie token the grammar accepts next, ascending (from AllowedMask).
  void AllowedTokens(const TokenTrie& trie, std::vector<int32_t>* allowed) const;
  // The same set by the plain walk with full states at every node and no memo (trie order); the reference
  // the memoized walk is tested against.
  void AllowedTokensReference(const TokenTrie& trie, std::vector<int32_t>* allowed) const;

  using Stack = std::vector<uint32_t>;  // grammar positions; back() = the next element to match
  struct State {
    std::vector<Stack> stacks;  // sorted, unique; an empty stack = the sentence may end here
    uint32_t partial = 0;       // bits of a partly decoded UTF-8 character
    int8_t remaining = 0;       // its continuation bytes still expected
    int8_t length = 0;          // its length in bytes (2..4; no over-long forms)
  };

 private:
  // Pushes every stack reachable from `s` whose top is a character class (or which is empty) into `out`.
  void Expand(Stack s, std::vector<Stack>* out, int depth = 0) const;
  bool FeedByte(const State& in, uint8_t byte, State* out) const;
  // Whether FeedByte would succeed, without building the next state (no allocation): most candidate tokens
  // and trie edges are rejected by this check alone.
  bool ByteOk(const State& st, uint8_t byte) const;
  void AdvanceChar(const std::vector<Stack>& in, uint32_t cp, std::vector<Stack>* out) const;
  bool PartialFeasible(const State& st) const;
  // The plain walk below `node` in state `st`; `take(token)` for each accepted token.
  template <typename Take>
  void Walk(const TokenTrie& trie, uint32_t node, const State& st, Take&& take) const;

  // Memo state numbers, and the transition table's other values.
  static constexpr int32_t kUnknown = -1, kRejected = -2, kOverflow = -3;
  static constexpr size_t kMaxMasks = 16;
  struct Memo {
    const TokenTrie* trie = nullptr;               // the trie the cached masks belong to
    std::unordered_map<std::string, int32_t> ids;  // Key(state) -> state number
    std::vector<State> states;                     // [state number]
    std::vector<int16_t> next;                     // [state number][256 bytes] -> state number or kUnknown...
    std::vector<std::pair<int32_t, std::vector<uint64_t>>> masks;  // (start state, its mask); ring
    size_t next_mask = 0;                                          // the ring slot to replace next
  };
  std::string Key(const State& st) const;
  // Clears the memo when it is 3/4 full (between calls, when no state numbers are held).
  void MakeRoom() const;
  // The state's number, or kOverflow when the memo is full.
  int32_t Intern(const State& st) const;
  int32_t Current() const;  // state_'s number (cached until Advance)
  int32_t Transition(int32_t st, uint8_t byte) const;
  void WalkMemo(const TokenTrie& trie, int32_t start, uint64_t* mask) const;

  std::shared_ptr<const Grammar> g_;
  State state_;
  size_t max_states_;
  mutable Memo memo_;
  mutable int32_t current_ = kUnknown;
  mutable std::vector<int32_t> walk_states_;  // scratch [trie depth + 1]
  mutable size_t expanded_entries_ = 0;       // entries Expand has pushed since the current state began
  mutable bool overflowed_ = false;
};

}  // namespace rw::grammar
