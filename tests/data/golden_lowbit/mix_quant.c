// Writes a mixed-type copy of an F32 GGUF with llama.cpp v0.5.0's ggml quantisers (ggml_quantize_chunk, the
// function llama-quantize calls), one type per tensor chosen by name patterns: a stand-in for
// `llama-quantize --tensor-type` while libllama is not built. Tensors that llama-quantize never quantises
// (1-D, ssm_conv1d, ssm_a, ssm_dt, routers) stay F32; a row length that is not a whole number of blocks keeps F32.
// The importance matrix (required by IQ1/IQ2) is
// a uniform one (all ones), stated in the fixture README.
// usage: mix_quant IN.gguf OUT.gguf PATTERN=TYPE [PATTERN=TYPE ...]   (first matching substring wins; "*" = any)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "ggml.h"
#include "gguf.h"

static enum ggml_type parse_type(const char* s) {
  for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
    const char* n = ggml_type_name((enum ggml_type)t);
    if (n && strcasecmp(n, s) == 0) return (enum ggml_type)t;
  }
  fprintf(stderr, "unknown type %s\n", s);
  exit(2);
}

int main(int argc, char** argv) {
  if (argc < 4) { fprintf(stderr, "usage: mix_quant IN OUT PATTERN=TYPE...\n"); return 2; }
  struct ggml_context* meta = NULL;
  struct gguf_init_params ip = {.no_alloc = false, .ctx = &meta};
  struct gguf_context* in = gguf_init_from_file(argv[1], ip);
  if (!in) return 1;
  struct gguf_context* out = gguf_init_empty();
  gguf_set_kv(out, in);
  const int64_t n_tensors = gguf_get_n_tensors(in);
  void** bufs = calloc(n_tensors, sizeof(void*));
  for (int64_t i = 0; i < n_tensors; ++i) {
    const char* name = gguf_get_tensor_name(in, i);
    struct ggml_tensor* t = ggml_get_tensor(meta, name);
    enum ggml_type type = GGML_TYPE_F32;
    const int quantisable = ggml_n_dims(t) >= 2 && !strstr(name, "ssm_conv1d") && !strstr(name, "ffn_gate_inp");
    for (int a = 3; a < argc && quantisable; ++a) {
      char pat[256];
      snprintf(pat, sizeof pat, "%s", argv[a]);
      char* eq = strchr(pat, '=');
      *eq = 0;
      if (strcmp(pat, "*") == 0 || strstr(name, pat)) { type = parse_type(eq + 1); break; }
    }
    if (t->ne[0] % ggml_blck_size(type) != 0) type = GGML_TYPE_F32;
    gguf_add_tensor(out, t);
    gguf_set_tensor_type(out, name, type);
    if (type != GGML_TYPE_F32) {
      const int64_t rows = ggml_nrows(t), cols = t->ne[0];
      float* imat = malloc(sizeof(float) * cols);
      for (int64_t c = 0; c < cols; ++c) imat[c] = 1.0f;
      bufs[i] = malloc(ggml_row_size(type, cols) * rows);
      // 3-D tensors (experts) carry one importance row per expert in llama-quantize; uniform here either way.
      ggml_quantize_chunk(type, (const float*)t->data, bufs[i], 0, rows, cols, imat);
      gguf_set_tensor_data(out, name, bufs[i]);
      free(imat);
    } else {
      gguf_set_tensor_data(out, name, t->data);
    }
    printf("%-40s %s\n", name, ggml_type_name(type));
  }
  if (!gguf_write_to_file(out, argv[2], false)) return 1;
  return 0;
}
