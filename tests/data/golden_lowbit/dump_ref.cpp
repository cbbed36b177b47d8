// Golden reference dumper for rewind's low-bit fixtures (built outside the repo against llama.cpp v0.5.0's
// libllama). Procedure of ../shared/fixtures/llama-ref/README.md section 4.2: per prompt a fresh context
// (1 thread, n_ctx 2048, n_batch = n_ubatch = 512, F32 KV, flash attention off); the prompt in chunks of 512,
// logits of every position if n <= 64 else of the last 8; state sizes; 32 greedy steps (ties -> lowest id).
// usage: dump_ref MODEL.gguf PROMPTS.json OUTDIR [CASE,CASE,...]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "llama.h"

using json = nlohmann::json;

static json Exact(float v) {  // 9 significant digits round-trip a float32
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return json::parse(b);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: dump_ref MODEL PROMPTS OUTDIR [CASES]\n");
    return 2;
  }
  const std::string model_path = argv[1], out_dir = argv[3];
  std::set<std::string> only;
  if (argc > 4) {
    std::stringstream ss(argv[4]);
    for (std::string s; std::getline(ss, s, ',');) only.insert(s);
  }
  std::ifstream pf(argv[2]);
  const json prompts = json::parse(pf);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  json man;
  man["model"] = model_path.substr(model_path.find_last_of('/') + 1);
  man["llama_cpp"] = "v0.5.0";
  man["n_vocab"] = n_vocab;
  man["settings"] = {{"n_threads", 1}, {"n_batch", 512}, {"n_ubatch", 512}, {"n_ctx", 2048}, {"type_k", "f32"},
                     {"type_v", "f32"}, {"flash_attn", "off"}, {"use_extra_bufts", true}, {"n_seq_max", 1},
                     {"n_rs_seq", 0}, {"add_special", false}, {"n_gen", 32}, {"full_max", 64}, {"tail", 8}};
  man["cases"] = json::array();
  for (const auto& c : prompts["cases"]) {
    const std::string name = c["name"].get<std::string>();
    if (!only.empty() && !only.count(name)) continue;
    const std::vector<llama_token> toks = c["tokens"].get<std::vector<llama_token>>();
    const int n = static_cast<int>(toks.size());
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_rs_seq = 0;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return 1;
    const int first = n <= 64 ? 0 : n - 8;
    std::vector<int> positions;
    std::vector<float> rows;
    llama_batch b = llama_batch_init(512, 0, 1);
    for (int c0 = 0; c0 < n; c0 += 512) {
      const int c1 = std::min(n, c0 + 512);
      b.n_tokens = 0;
      for (int i = c0; i < c1; ++i, ++b.n_tokens) {
        b.token[b.n_tokens] = toks[i];
        b.pos[b.n_tokens] = i;
        b.n_seq_id[b.n_tokens] = 1;
        b.seq_id[b.n_tokens][0] = 0;
        b.logits[b.n_tokens] = i >= first;
      }
      if (llama_decode(ctx, b) != 0) return 1;
      for (int i = std::max(c0, first); i < c1; ++i) {
        const float* l = llama_get_logits_ith(ctx, i - c0);
        rows.insert(rows.end(), l, l + n_vocab);
        positions.push_back(i);
      }
    }
    const size_t size_full = llama_state_seq_get_size_ext(ctx, 0, 0);
    const size_t size_partial = llama_state_seq_get_size_ext(ctx, 0, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY);
    std::vector<float> cur(rows.end() - n_vocab, rows.end());
    json tokens = json::array(), margins = json::array(), topk = json::array();
    for (int s = 0; s < 32; ++s) {
      std::vector<int> idx(n_vocab);
      for (int i = 0; i < n_vocab; ++i) idx[i] = i;
      std::stable_sort(idx.begin(), idx.end(), [&](int x, int y) { return cur[x] > cur[y]; });
      tokens.push_back(idx[0]);
      margins.push_back(Exact(cur[idx[0]] - cur[idx[1]]));
      json top = json::array();
      for (int k = 0; k < 8; ++k) top.push_back({idx[k], Exact(cur[idx[k]])});
      topk.push_back(top);
      if (s == 31) break;
      b.n_tokens = 1;
      b.token[0] = idx[0];
      b.pos[0] = n + s;
      b.n_seq_id[0] = 1;
      b.seq_id[0][0] = 0;
      b.logits[0] = 1;
      if (llama_decode(ctx, b) != 0) return 1;
      const float* l = llama_get_logits_ith(ctx, 0);
      cur.assign(l, l + n_vocab);
    }
    llama_batch_free(b);
    std::ofstream of(out_dir + "/" + name + ".f32", std::ios::binary);
    of.write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * sizeof(float)));
    json jc;
    jc["name"] = name;
    jc["n_prompt"] = n;
    jc["logits_file"] = name + ".f32";
    jc["logits_shape"] = {static_cast<int>(positions.size()), n_vocab};
    jc["logit_positions"] = positions;
    jc["state_seq_size"] = size_full;
    jc["state_seq_size_partial_only"] = size_partial;
    jc["greedy_tokens"] = tokens;
    jc["greedy_top1_margin"] = margins;
    jc["greedy_topk"] = topk;
    man["cases"].push_back(jc);
    llama_free(ctx);
    std::fprintf(stderr, "%s: %d tokens, %zu rows\n", name.c_str(), n, positions.size());
  }
  std::ofstream(out_dir + "/manifest.json") << man.dump(1) << "\n";
  llama_model_free(model);
  return 0;
}
