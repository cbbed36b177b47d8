// Dumps llama.cpp v0.5.0 reference outputs for prompts with images (libmtmd + libllama, CPU, 1 thread): for each
// case a fresh context (F32 KV cache, flash attention off), the prompt tokenised by mtmd_tokenize (the media
// marker <__media__> replaced by <|vision_start|> (image) <|vision_end|>), evaluated by mtmd_helper_eval_chunks,
// the logits of the last prompt position stored, then `steps` greedy steps (one token per llama_decode) with their
// top-8 logits. The manifest records every chunk (text token ids; image nx, ny, n_pos) so that a test rebuilds the
// exact prompt. Build (outside the repo) against llama.cpp v0.5.0:
//   g++ -O1 -std=c++17 -I$LLAMA/include -I$LLAMA/ggml/include -I$LLAMA/tools/mtmd dump_mtmd_ref.cc \
//       -L$BUILD/bin -lmtmd -lllama -lggml -lggml-base -o dump_mtmd_ref
// Run: dump_mtmd_ref MODEL.gguf MMPROJ.gguf CASES.json OUT_DIR
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static int Argmax(const float* x, int n) {
  int b = 0;
  for (int i = 1; i < n; ++i)
    if (x[i] > x[b]) b = i;  // ties -> lowest id
  return b;
}

int main(int argc, char** argv) {
  if (argc != 5) return 2;
  const std::string model_path = argv[1], mmproj_path = argv[2], cases_path = argv[3], out = argv[4];
  nlohmann::json cases = nlohmann::json::parse(std::ifstream(cases_path));
  const std::string dir = cases_path.substr(0, cases_path.find_last_of('/') + 1);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(model_path.c_str(), mp);
  if (!model) return 1;
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(model));
  mtmd_context_params cp = mtmd_context_params_default();
  cp.use_gpu = false;
  cp.n_threads = 1;
  cp.warmup = false;
  cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
  mtmd_context* mctx = mtmd_init_from_file(mmproj_path.c_str(), model, cp);
  if (!mctx) return 1;
  nlohmann::json manifest = nlohmann::json::array();
  for (const auto& c : cases["cases"]) {
    const std::string name = c["name"];
    const int steps = c.value("steps", 8);
    llama_context_params lp = llama_context_default_params();
    lp.n_ctx = 4096;
    lp.n_batch = 4096;
    lp.n_ubatch = 4096;
    lp.n_threads = lp.n_threads_batch = 1;
    lp.type_k = lp.type_v = GGML_TYPE_F32;
    lp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context* ctx = llama_init_from_model(model, lp);
    std::vector<mtmd_bitmap*> bitmaps;
    for (const auto& f : c["images"]) {
      auto w = mtmd_helper_bitmap_init_from_file(mctx, (dir + f.get<std::string>()).c_str(), false,
                                                 mtmd_helper_init_opt_default());
      if (!w.bitmap) return 3;
      bitmaps.push_back(w.bitmap);
    }
    const std::string prompt = c["prompt"];
    mtmd_input_text text{prompt.c_str(), prompt.size(), true, true};
    mtmd_input_chunks* chunks = mtmd_input_chunks_init();
    if (mtmd_tokenize(mctx, chunks, &text, bitmaps.data(), bitmaps.size()) != 0) return 4;
    nlohmann::json segs = nlohmann::json::array();
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
      const mtmd_input_chunk* ch = mtmd_input_chunks_get(chunks, i);
      if (mtmd_input_chunk_get_type(ch) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
        size_t n = 0;
        const llama_token* t = mtmd_input_chunk_get_tokens_text(ch, &n);
        segs.push_back({{"text", std::vector<int>(t, t + n)}});
      } else {
        const mtmd_image_tokens* it = mtmd_input_chunk_get_tokens_image(ch);
        segs.push_back({{"image_tokens", mtmd_image_tokens_get_n_tokens(it)},
                        {"nx", mtmd_image_tokens_get_nx(it)},
                        {"ny", mtmd_image_tokens_get_ny(it)},
                        {"n_pos", mtmd_image_tokens_get_n_pos(it)}});
      }
    }
    llama_pos n_past = 0;
    if (mtmd_helper_eval_chunks(mctx, ctx, chunks, 0, 0, 4096, true, &n_past) != 0) return 5;
    std::vector<float> rows;
    const float* lg = llama_get_logits_ith(ctx, -1);
    rows.insert(rows.end(), lg, lg + V);
    nlohmann::json greedy = nlohmann::json::array();
    int tok = Argmax(lg, V);
    for (int s = 0; s < steps; ++s) {
      llama_batch b = llama_batch_get_one(&tok, 1);
      llama_pos pos = n_past;
      b.pos = &pos;
      if (llama_decode(ctx, b) != 0) return 6;
      ++n_past;
      const float* l = llama_get_logits_ith(ctx, -1);
      std::vector<int> idx(V);
      for (int i = 0; i < V; ++i) idx[i] = i;
      std::partial_sort(idx.begin(), idx.begin() + 8, idx.end(), [&](int a, int b2) {
        return l[a] > l[b2] || (l[a] == l[b2] && a < b2);
      });
      nlohmann::json top = nlohmann::json::array();
      for (int k = 0; k < 8; ++k) top.push_back({idx[k], l[idx[k]]});
      greedy.push_back({{"token", tok}, {"top", top}});
      tok = idx[0];
    }
    std::ofstream(out + "/" + name + ".f32", std::ios::binary)
        .write(reinterpret_cast<const char*>(rows.data()), static_cast<std::streamsize>(rows.size() * 4));
    manifest.push_back({{"name", name}, {"images", c["images"]}, {"segments", segs}, {"n_pos", n_past},
                        {"greedy", greedy}});
    mtmd_input_chunks_free(chunks);
    for (auto* bm : bitmaps) mtmd_bitmap_free(bm);
    llama_free(ctx);
  }
  std::ofstream(out + "/manifest.json") << manifest.dump(1) << "\n";
  mtmd_free(mctx);
  llama_model_free(model);
  return 0;
}
