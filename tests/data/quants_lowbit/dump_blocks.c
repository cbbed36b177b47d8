// Dumps rows quantised by llama.cpp's ggml (ggml_quantize_chunk) and their dequantisation (type_traits to_float)
// for rewind's unit tests. Built outside the repo against llama.cpp v0.5.0's libggml-base.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ggml.h"
#define GGML_COMMON_DECL_C
#include "ggml-common.h"

static uint64_t rng = 88172645463325252ull;
static uint32_t next_u32(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (uint32_t)(rng >> 11); }
static float uniform(void) { return (next_u32() + 0.5f) / 4294967296.0f; }
static float normal(void) { return sqrtf(-2.0f * logf(uniform())) * cosf(6.2831853f * uniform()); }

static void put(FILE* f, const void* p, size_t n) { fwrite(p, 1, n, f); }

// Offsets of the fp16 scale fields of one block, to keep random-byte blocks finite.
static int scale_offsets(enum ggml_type t, int* off) {
  switch (t) {
    case GGML_TYPE_Q2_K: off[0] = offsetof(block_q2_K, d); off[1] = off[0] + 2; return 2;
    case GGML_TYPE_Q3_K: off[0] = offsetof(block_q3_K, d); return 1;
    case GGML_TYPE_TQ1_0: off[0] = offsetof(block_tq1_0, d); return 1;
    case GGML_TYPE_TQ2_0: off[0] = offsetof(block_tq2_0, d); return 1;
    case GGML_TYPE_IQ2_XXS: case GGML_TYPE_IQ2_XS: case GGML_TYPE_IQ2_S: case GGML_TYPE_IQ3_XXS:
    case GGML_TYPE_IQ3_S: case GGML_TYPE_IQ1_S: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS: off[0] = 0; return 1;
    default: return 0;  // IQ1_M (scale bits spread over the scales), MXFP4 (E8M0 byte): any bits are finite-ish
  }
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: dump_blocks OUT\n"); return 1; }
  const enum ggml_type types[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
                                  GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS,
                                  GGML_TYPE_IQ2_S, GGML_TYPE_IQ1_S, GGML_TYPE_IQ1_M, GGML_TYPE_TQ1_0,
                                  GGML_TYPE_TQ2_0, GGML_TYPE_MXFP4};
  FILE* f = fopen(argv[1], "wb");
  const int64_t cols = 512, rows = 3;  // rows 0-1 quantised from normal data (row 1 with outliers), row 2 random bytes
  float* src = malloc(sizeof(float) * cols * rows);
  float* imat = malloc(sizeof(float) * cols);
  float* deq = malloc(sizeof(float) * cols * rows);
  for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); ++k) {
    const enum ggml_type t = types[k];
    for (int64_t i = 0; i < cols * rows; ++i) src[i] = normal() * (i % 97 == 0 && i / cols == 1 ? 8.0f : 1.0f);
    for (int64_t i = 0; i < cols; ++i) imat[i] = 0.5f + uniform();
    const size_t row_bytes = ggml_row_size(t, cols);
    uint8_t* q = malloc(row_bytes * rows);
    ggml_quantize_chunk(t, src, q, 0, rows, cols, imat);
    uint8_t* rnd = q + 2 * row_bytes;
    for (size_t i = 0; i < row_bytes; ++i) rnd[i] = (uint8_t)next_u32();
    int off[2];
    const int n_off = scale_offsets(t, off);
    const size_t bb = ggml_type_size(t);
    for (size_t b = 0; b < row_bytes / bb; ++b)
      for (int o = 0; o < n_off; ++o) {
        const ggml_fp16_t h = ggml_fp32_to_fp16(0.01f + 0.02f * uniform());
        memcpy(rnd + b * bb + off[o], &h, 2);
      }
    ggml_get_type_traits(t)->to_float(q, deq, cols * rows);
    const uint32_t tid = (uint32_t)t;
    put(f, &tid, 4); put(f, &cols, 8); put(f, &rows, 8);
    put(f, q, row_bytes * rows);
    put(f, deq, sizeof(float) * cols * rows);
    printf("%-8s %zu bytes/row\n", ggml_type_name(t), row_bytes);
    free(q);
  }
  fclose(f);
  return 0;
}
