// Speculative decoding drafters. The engine owns verification and rollback (exact, through the replay log);
// a drafter only proposes tokens. All calls happen on the engine thread. `key` identifies the sequence slot.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/expected.h"

namespace rw::model {
class Model;
}

namespace rw::engine {

class Drafter {
 public:
  virtual ~Drafter() = default;
  virtual const char* name() const = 0;

  // A request starts on `key`. `prompt` is its whole prompt; nothing of it is evaluated by the drafter yet.
  virtual void Begin(int32_t key, std::span<const int32_t> prompt) = 0;
  // The target evaluated `tokens` at positions [pos0, pos0 + n) of sequence `key` (prompt chunks, decode and
  // verify batches, before any rollback). `hidden` is [n][n_embd] of the target's final normed hidden rows
  // (model-qwen35.md section 8) when wants_hidden() returned true, else empty.
  virtual void Observe(int32_t key, int32_t pos0, std::span<const int32_t> tokens, std::span<const float> hidden) = 0;
  // Proposes up to n_max tokens that continue `context` (prompt + accepted generated tokens, ending with the
  // token that was just sampled and is not evaluated yet). May return fewer (or none).
  virtual std::vector<int32_t> Draft(int32_t key, std::span<const int32_t> context, int32_t n_max) = 0;
  // After verification the target keeps only positions [0, n_kept) (the rest was rolled back).
  virtual void Rollback(int32_t key, int32_t n_kept) = 0;
  // The request on `key` ended.
  virtual void End(int32_t key) = 0;
  // True if Observe needs the hidden rows (MTP).
  virtual bool wants_hidden() const { return false; }
  // Where a draft model's forward runs ("cpu" or "vulkanN (name, memory)"); the other drafters run no model.
  virtual std::string device() const { return "cpu"; }
  // Device memory the drafter holds at most with n_seqs sequences of up to n_ctx tokens (0 on the CPU): what
  // the target's KV page pool must leave free on a shared device.
  virtual uint64_t device_bytes(int32_t /*n_ctx*/, int32_t /*n_seqs*/) const { return 0; }
};

// n-gram prompt lookup: the longest recent n-gram (n = max_n .. 1) of the context that occurred earlier in it
// proposes the tokens that followed its most recent earlier occurrence.
std::unique_ptr<Drafter> MakeNgramDrafter(int32_t max_n = 3);

// Factory for drafters that need the model: "mtp" (the GGUF's NextN head) and "draft" (a second model file).
// Defined in drafter_mtp.cc / drafter_model.cc when they exist; an Unsupported error otherwise.
// draft_vocab: the MTP head drafts among token ids [0, draft_vocab) only (0 = the whole vocabulary).
Expected<std::unique_ptr<Drafter>> MakeMtpDrafter(model::Model& target, int32_t n_threads,
                                                  int32_t draft_vocab = 0);
Expected<std::unique_ptr<Drafter>> MakeModelDrafter(const std::string& path, model::Model& target, int32_t n_threads);

}  // namespace rw::engine
