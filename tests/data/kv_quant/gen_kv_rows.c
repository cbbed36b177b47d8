// Writes llama_kv_rows.bin: test rows and their KV-cache encodings by llama.cpp v0.5.0's reference quantisers
// (ggml_get_type_traits(type)->from_float_ref, i.e. quantize_row_*_ref). Build against llama.cpp's ggml-base:
//   cc -O0 -I$LLAMA/ggml/include gen_kv_rows.c -L$LLAMA/build/bin -lggml-base -lm -o gen_kv_rows
//   LD_LIBRARY_PATH=$LLAMA/build/bin ./gen_kv_rows llama_kv_rows.bin
// Format (little-endian): u32 rows, u32 cols, rows*cols f32; then per type: u32 ggml type id, u32 row bytes,
// rows * row bytes encoded.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"

enum { ROWS = 10, COLS = 256 };

static uint64_t state = 0x9E3779B97F4A7C15ull;
static double uniform(void) {  // xorshift64*, in (0, 1)
  state ^= state >> 12;
  state ^= state << 25;
  state ^= state >> 27;
  return ((state * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0) + 1e-18;
}
static float normal(void) { return (float)(sqrt(-2.0 * log(uniform())) * cos(6.283185307179586 * uniform())); }

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  static float x[ROWS][COLS];
  for (int r = 0; r < ROWS; ++r)
    for (int c = 0; c < COLS; ++c) x[r][c] = normal() * (r < 4 ? 1.0f : (float)(r * 3));
  // Edge cases per 32-element block of the last rows: all zero, tiny, exact halves (rounding ties), one large
  // outlier, all equal, all negative, a positive maximum, huge magnitudes.
  for (int c = 0; c < 32; ++c) {
    x[8][c] = 0.0f;
    x[8][32 + c] = 1e-20f * (c - 16);
    x[8][64 + c] = (float)(c - 16) + 0.5f;
    x[8][96 + c] = c == 7 ? 100.0f : 0.01f * c;
    x[8][128 + c] = 0.75f;
    x[8][160 + c] = -1.0f - 0.1f * c;
    x[8][192 + c] = 0.1f * c;
    x[8][224 + c] = 3000.0f * (c % 5 - 2);
    x[9][c] = (float)(c * 4 - 64) / 127.0f * 3.0f;  // q8_0 ties at the block scale
  }
  FILE* f = fopen(argv[1], "wb");
  if (!f) return 1;
  const uint32_t rows = ROWS, cols = COLS;
  fwrite(&rows, 4, 1, f);
  fwrite(&cols, 4, 1, f);
  fwrite(x, sizeof x, 1, f);
  const enum ggml_type types[] = {GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q5_1, GGML_TYPE_Q5_0,
                                  GGML_TYPE_Q4_1, GGML_TYPE_Q4_0, GGML_TYPE_IQ4_NL};
  for (size_t t = 0; t < sizeof types / sizeof types[0]; ++t) {
    const struct ggml_type_traits* tr = ggml_get_type_traits(types[t]);
    const uint32_t id = types[t], rb = (uint32_t)ggml_row_size(types[t], COLS);
    unsigned char* out = calloc(ROWS, rb);
    for (int r = 0; r < ROWS; ++r) tr->from_float_ref(x[r], out + (size_t)r * rb, COLS);
    fwrite(&id, 4, 1, f);
    fwrite(&rb, 4, 1, f);
    fwrite(out, rb, ROWS, f);
    free(out);
  }
  return fclose(f) == 0 ? 0 : 1;
}
