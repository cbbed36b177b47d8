// Fallback for llama-imatrix / llama-quantize while llama.cpp's common library is not built: the same library
// calls (llama_model_quantize with an importance matrix and tensor-type overrides), the importance matrix
// collected like llama-imatrix (mean of the squared activations entering each weight matrix, per column).
// usage: quant_tool imatrix MODEL TEXT OUT.bin CTX
//        quant_tool quantize IN OUT FTYPE_ID IMATRIX.bin|- [PATTERN=TYPE ...]
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ggml.h"
#include "llama.h"

struct Stats {
  std::map<std::string, std::vector<double>> sum2;
  std::map<std::string, int64_t> count;
};

static bool Collect(ggml_tensor* t, bool ask, void* ud) {
  if (t->op != GGML_OP_MUL_MAT) return false;
  const ggml_tensor* w = t->src[0];
  const ggml_tensor* x = t->src[1];
  if (w->name[0] == '\0' || std::strstr(w->name, ".weight") == nullptr || x->type != GGML_TYPE_F32) return false;
  if (ask) return true;
  auto* s = static_cast<Stats*>(ud);
  auto& v = s->sum2[w->name];
  const int64_t n = x->ne[0];
  if (v.empty()) v.assign(n, 0.0);
  const int64_t rows = ggml_nrows(x);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i1 = r % x->ne[1], i2 = (r / x->ne[1]) % x->ne[2], i3 = r / (x->ne[1] * x->ne[2]);
    const float* p = reinterpret_cast<const float*>(static_cast<const char*>(x->data) + i1 * x->nb[1] +
                                                    i2 * x->nb[2] + i3 * x->nb[3]);
    for (int64_t j = 0; j < n; ++j) v[j] += static_cast<double>(p[j]) * p[j];
  }
  s->count[w->name] += rows;
  return true;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  llama_backend_init();
  const std::string mode = argv[1];
  if (mode == "imatrix" && argc == 6) {
    llama_model_params mp = llama_model_default_params();
    llama_model* model = llama_model_load_from_file(argv[2], mp);
    if (!model) return 1;
    std::ifstream tf(argv[3]);
    std::stringstream ss;
    ss << tf.rdbuf();
    const std::string text = ss.str();
    std::vector<llama_token> toks(text.size() + 16);
    const int n = llama_tokenize(llama_model_get_vocab(model), text.c_str(), static_cast<int>(text.size()),
                                 toks.data(), static_cast<int>(toks.size()), false, true);
    toks.resize(n);
    const int ctx_len = std::atoi(argv[5]);
    Stats stats;
    for (int c0 = 0; c0 + ctx_len <= n; c0 += ctx_len) {
      llama_context_params cp = llama_context_default_params();
      cp.n_ctx = cp.n_batch = cp.n_ubatch = ctx_len;
      cp.n_threads = cp.n_threads_batch = 1;
      cp.cb_eval = Collect;
      cp.cb_eval_user_data = &stats;
      llama_context* ctx = llama_init_from_model(model, cp);
      llama_batch b = llama_batch_get_one(toks.data() + c0, ctx_len);
      if (llama_decode(ctx, b) != 0) return 1;
      llama_free(ctx);
    }
    FILE* f = std::fopen(argv[4], "wb");
    for (const auto& [name, v] : stats.sum2) {
      const uint32_t len = static_cast<uint32_t>(name.size()), sz = static_cast<uint32_t>(v.size());
      std::fwrite(&len, 4, 1, f);
      std::fwrite(name.data(), 1, len, f);
      std::fwrite(&sz, 4, 1, f);
      for (double d : v) {
        const float m = static_cast<float>(d / static_cast<double>(stats.count[name]));
        std::fwrite(&m, 4, 1, f);
      }
    }
    std::fclose(f);
    std::fprintf(stderr, "imatrix: %d tokens, %zu tensors\n", n, stats.sum2.size());
    return 0;
  }
  if (mode == "quantize" && argc >= 6) {
    llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = 1;
    qp.ftype = static_cast<llama_ftype>(std::atoi(argv[4]));
    std::vector<std::string> names;
    std::vector<std::vector<float>> datas;
    std::vector<llama_model_imatrix_data> im;
    if (std::strcmp(argv[5], "-") != 0) {
      FILE* f = std::fopen(argv[5], "rb");
      uint32_t len;
      while (std::fread(&len, 4, 1, f) == 1) {
        std::string name(len, '\0');
        uint32_t sz;
        if (std::fread(name.data(), 1, len, f) != len || std::fread(&sz, 4, 1, f) != 1) return 1;
        std::vector<float> v(sz);
        if (std::fread(v.data(), 4, sz, f) != sz) return 1;
        names.push_back(name);
        datas.push_back(std::move(v));
      }
      std::fclose(f);
      for (size_t i = 0; i < names.size(); ++i) im.push_back({names[i].c_str(), datas[i].data(), datas[i].size()});
      im.push_back({nullptr, nullptr, 0});
      qp.imatrix = im.data();
    }
    std::vector<std::string> pats;
    std::vector<llama_model_tensor_override> tt;
    for (int a = 6; a < argc; ++a) pats.push_back(argv[a]);
    for (auto& p : pats) {
      const size_t eq = p.find('=');
      const std::string type = p.substr(eq + 1);
      p.resize(eq);
      ggml_type gt = GGML_TYPE_COUNT;
      for (int i = 0; i < GGML_TYPE_COUNT; ++i) {
        const char* nm = ggml_type_name(static_cast<ggml_type>(i));
        if (nm && strcasecmp(nm, type.c_str()) == 0) gt = static_cast<ggml_type>(i);
      }
      if (gt == GGML_TYPE_COUNT) return 2;
      tt.push_back({p.c_str(), gt});
    }
    if (!tt.empty()) {
      tt.push_back({nullptr, GGML_TYPE_COUNT});
      qp.tt_overrides = tt.data();
    }
    return llama_model_quantize(argv[2], argv[3], &qp) == 0 ? 0 : 1;
  }
  return 2;
}
