// Dumps llama.cpp reference outputs for a KV cache type, in the layout of the llama-ref fixtures
// (../golden and ../../../../shared/fixtures/llama-ref/README.md sections 4.2 and 4.6): for each named prompt a
// fresh context, the prompt decoded in chunks of 512, the logits of the last `tail` positions stored, then 32
// greedy steps (one token per llama_decode) with their top-8 logits. Settings as the F32 references except the
// KV cache types and flash attention (on: llama.cpp requires it for a quantised V cache).
// Build (outside the repo) against llama.cpp v0.5.0:
//   g++ -O1 -std=c++17 -I$LLAMA/include -I$LLAMA/ggml/include dump_kv_ref.cc -L$LLAMA/build/bin -lllama \
//       -lggml -lggml-base -o dump_kv_ref
// Run: dump_kv_ref MODEL.gguf PROMPTS.json OUT_DIR TYPE_K TYPE_V TAIL CASE...
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llama.h"

static ggml_type TypeOf(const std::string& s) {
  const std::pair<const char*, ggml_type> m[] = {{"f32", GGML_TYPE_F32},   {"f16", GGML_TYPE_F16},
                                                 {"bf16", GGML_TYPE_BF16}, {"q8_0", GGML_TYPE_Q8_0},
                                                 {"q5_1", GGML_TYPE_Q5_1}, {"q5_0", GGML_TYPE_Q5_0},
                                                 {"q4_1", GGML_TYPE_Q4_1}, {"q4_0", GGML_TYPE_Q4_0},
                                                 {"iq4_nl", GGML_TYPE_IQ4_NL}};
  for (auto& [n, t] : m)
    if (s == n) return t;
  std::fprintf(stderr, "unknown type %s\n", s.c_str());
  std::exit(2);
}

static int Argmax(const float* x, int n) {
  int b = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[b]) b = i;  // ties -> lowest id
  return b;
}

static std::string G9(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

int main(int argc, char** argv) {
  if (argc < 8) return 2;
  const std::string model_path = argv[1], prompts_path = argv[2], out = argv[3], tk = argv[4], tv = argv[5];
  const int tail = std::atoi(argv[6]);
  std::vector<std::string> names(argv + 7, argv + argc);
  nlohmann::json prompts = nlohmann::json::parse(std::ifstream(prompts_path));
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
  const int n_gen = 32;
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& name : names) {
    std::vector<llama_token> toks;
    for (const auto& c : prompts["cases"])
      if (c["name"] == name) toks = c["tokens"].get<std::vector<llama_token>>();
    if (toks.empty()) return 3;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 2048;
    cp.n_batch = 512;
    cp.n_ubatch = 512;
    cp.n_seq_max = 1;
    cp.n_rs_seq = 0;
    cp.n_threads = cp.n_threads_batch = 1;
    cp.type_k = TypeOf(tk);
    cp.type_v = TypeOf(tv);
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    llama_context* ctx = llama_init_from_model(model, cp);
    if (!ctx) return 4;
    const int n = static_cast<int>(toks.size());
    const int first_kept = std::max(0, n - tail);
    std::vector<float> kept;
    std::vector<int> positions;
    for (int p0 = 0; p0 < n; p0 += 512) {
      const int m = std::min(512, n - p0);
      llama_batch b = llama_batch_init(m, 0, 1);
      for (int i = 0; i < m; ++i) {
        b.token[i] = toks[p0 + i];
        b.pos[i] = p0 + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = p0 + i >= first_kept;
      }
      b.n_tokens = m;
      if (llama_decode(ctx, b) != 0) return 5;
      for (int i = 0; i < m; ++i)
        if (p0 + i >= first_kept) {
          const float* l = llama_get_logits_ith(ctx, i);
          kept.insert(kept.end(), l, l + V);
          positions.push_back(p0 + i);
        }
      llama_batch_free(b);
    }
    std::vector<float> last(kept.end() - V, kept.end());
    std::vector<int> greedy;
    std::vector<double> margins;
    nlohmann::json topk = nlohmann::json::array();
    for (int s = 0; s < n_gen; ++s) {
      const int t = Argmax(last.data(), V);
      std::vector<int> idx(V);
      for (int i = 0; i < V; ++i) idx[i] = i;
      std::partial_sort(idx.begin(), idx.begin() + 8, idx.end(),
                        [&](int a, int b2) { return last[a] > last[b2] || (last[a] == last[b2] && a < b2); });
      nlohmann::json row = nlohmann::json::array();
      for (int k = 0; k < 8; ++k) row.push_back(nlohmann::json::array({idx[k], nlohmann::json::parse(G9(last[idx[k]]))}));
      topk.push_back(row);
      greedy.push_back(t);
      margins.push_back(static_cast<double>(last[idx[0]]) - last[idx[1]]);
      if (s + 1 == n_gen) break;
      llama_batch b = llama_batch_init(1, 0, 1);
      b.token[0] = t;
      b.pos[0] = n + s;
      b.n_seq_id[0] = 1;
      b.seq_id[0][0] = 0;
      b.logits[0] = 1;
      b.n_tokens = 1;
      if (llama_decode(ctx, b) != 0) return 6;
      const float* l = llama_get_logits_ith(ctx, 0);
      last.assign(l, l + V);
      llama_batch_free(b);
    }
    const std::string file = name + ".f32";
    FILE* f = std::fopen((out + "/" + file).c_str(), "wb");
    std::fwrite(kept.data(), sizeof(float), kept.size(), f);
    std::fclose(f);
    nlohmann::json c;
    c["name"] = name;
    c["n_prompt"] = n;
    c["logits_file"] = file;
    c["logits_shape"] = {static_cast<int>(positions.size()), V};
    c["logit_positions"] = positions;
    c["greedy_tokens"] = greedy;
    nlohmann::json mj = nlohmann::json::array();
    for (double m : margins) mj.push_back(nlohmann::json::parse(G9(m)));
    c["greedy_top1_margin"] = mj;
    c["greedy_topk"] = topk;
    cases.push_back(c);
    llama_free(ctx);
  }
  std::string base = model_path.substr(model_path.find_last_of('/') + 1);
  nlohmann::json man;
  man["model"] = base;
  man["llama_cpp"] = "v0.5.0";
  man["n_vocab"] = V;
  man["settings"] = {{"n_threads", 1}, {"n_batch", 512},     {"n_ubatch", 512},    {"n_ctx", 2048},
                     {"type_k", tk},   {"type_v", tv},       {"flash_attn", "on"}, {"use_extra_bufts", true},
                     {"n_seq_max", 1}, {"n_rs_seq", 0},      {"add_special", false}, {"n_gen", n_gen},
                     {"tail", tail}};
  man["cases"] = cases;
  std::ofstream(out + "/manifest.json") << man.dump(1) << "\n";
  llama_model_free(model);
  return 0;
}
