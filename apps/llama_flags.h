// llama-server command lines for `rewind serve`: llama-server's spellings of rewind's own flags (-np, -cram,
// -md, --draft-max...), its flags that rewind applies (--chat-template-kwargs, --reasoning-format, --mlock,
// --timeout...), flags that have no effect here (GPU-only ones: one warning line; CPU ones rewind does not
// implement: one warning line each with the reason), and flags rewind refuses with a clear reason (model
// downloads, LoRA, multimodal...). Declared after rewind's flags (the aliases point at them).
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "base/flags.h"
#include "engine/engine_config.h"
#include "server/server.h"

namespace rw::apps {

class LlamaServerFlags {
 public:
  void Declare(FlagSet& flags);
  // Applies what was given to the configs. Prints the warning lines; returns an error for refused flags.
  Status Apply(const FlagSet& flags, engine::EngineConfig* ec, server::ServerConfig* sc);
  // After the model is loaded: --mlock.
  void AfterLoad() const;

 private:
  struct Ignored {
    std::string name;     // the declared (long) name
    std::string display;  // how the warning names it
    std::string why;      // "" = GPU-only
  };
  std::string chat_template_kwargs_, reasoning_format_ = "auto", reasoning_ = "auto", api_key_file_,
                                     reasoning_budget_message_, flash_attn_, device_ = "auto";
  int n_gpu_layers_ = -1;
  int reasoning_budget_ = -1, n_predict_ = -1, threads_batch_ = 0, ubatch_ = 0, timeout_ = 60, verbosity_ = 3;
  bool mlock_ = false, mmap_ = true, jinja_ = true, metrics_ = true, props_ = false, slots_ = true,
       cache_prompt_ = true, verbose_ = false, log_disable_ = false, cont_batching_ = true;
  std::deque<std::string> values_;  // storage of ignored / refused flags' values
  std::deque<bool> bools_;
  std::vector<Ignored> ignored_;
  std::vector<std::pair<std::string, std::string>> refused_;  // name, reason
};

}  // namespace rw::apps
