// tokenizer_bench: tokenization throughput on a few MB of mixed text (English-like prose, code, CJK, Cyrillic,
// emoji, numbers, chat markup). Prints numbers; asserts nothing.
//   tokenizer_bench [MODEL.gguf] [--mb N] [--file TEXT]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/file.h"
#include "gguf/gguf.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of this process: what the numbers below use, so that a busy shared machine does not distort them.
double Cpu() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::string MixedText(size_t bytes) {
  std::mt19937 rng(42);
  const char* syll[] = {"the", "an", "ing", "tion", "re", "con", "pro", "ex", "al", "er", "ly", "ment", "st", "ou",
                        "qu", "ch", "sh", "ph", "ba", "ke", "mi", "no", "sa", "ti", "ve", "wor", "ld", "ize", "ab"};
  std::vector<std::string> words;
  for (int i = 0; i < 3000; ++i) {
    std::string w;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < n; ++k) w += syll[rng() % (sizeof(syll) / sizeof(*syll))];
    if (rng() % 10 == 0) w[0] = static_cast<char>(w[0] - 32);
    words.push_back(w);
  }
  const char* code =
      "def f(x):\n    return x ** 2  # square\n\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n"
      "for (size_t i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n  if (err != nullptr) return -1;\n";
  const char* intl[] = {"\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81",
                        "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, \xD0\xBC\xD0\xB8\xD1\x80!",
                        "\xF0\x9F\xA6\x99\xF0\x9F\x9A\x80 ", "caf\xC3\xA9 na\xC3\xAFve r\xC3\xA9sum\xC3\xA9",
                        "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF"};
  std::string out;
  out.reserve(bytes + 256);
  while (out.size() < bytes) {
    const unsigned r = rng() % 100;
    if (r < 80) {  // a sentence, Zipf-like word choice
      const int n = 5 + static_cast<int>(rng() % 15);
      for (int k = 0; k < n; ++k) {
        const double u = std::uniform_real_distribution<double>(0, 1)(rng);
        out += words[static_cast<size_t>(words.size() * u * u * u)];
        out += k + 1 < n ? " " : ". ";
      }
      if (rng() % 5 == 0) out += std::to_string(rng() % 100000) + ", ";
      if (rng() % 8 == 0) out += "\n\n";
    } else if (r < 90) {
      out += code;
    } else if (r < 97) {
      out += intl[rng() % 5];
      out += ' ';
    } else {
      out += "<|im_start|>user\nHello<|im_end|>\n<think>\nok\n</think>\n";
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model = std::string(REWIND_SOURCE_DIR) + "/tests/data/tokenizer/ggml-vocab-qwen35.gguf";
  std::string file;
  double mb = 4;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--mb") && i + 1 < argc) {
      mb = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--file") && i + 1 < argc) {
      file = argv[++i];
    } else if (argv[i][0] != '-') {
      model = argv[i];
    } else {
      std::fprintf(stderr, "usage: tokenizer_bench [MODEL.gguf] [--mb N] [--file TEXT]\n");
      return 2;
    }
  }
  double t0 = Now(), c0 = Cpu();
  auto gf = rw::gguf::File::Open(model);
  if (!gf.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", gf.error().ToString().c_str());
    return 1;
  }
  auto tok = rw::tokenizer::Tokenizer::FromGguf(**gf);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer_bench: %s\n", tok.error().ToString().c_str());
    return 1;
  }
  const double t_load = Now() - t0, c_load = Cpu() - c0;
  std::string text;
  if (!file.empty()) {
    auto r = rw::ReadFileToString(file);
    if (!r.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", r.error().ToString().c_str());
      return 1;
    }
    text = std::move(r).value();
  } else {
    text = MixedText(static_cast<size_t>(mb * 1e6));
  }
  const double text_mb = static_cast<double>(text.size()) / 1e6;
  std::printf("model %s: n_vocab %d, %zu merges, pre %s, load %.3f s (%.3f s CPU)\n",
              model.c_str(), (*tok)->n_vocab(), (*tok)->n_merges(), rw::tokenizer::PreTypeName((*tok)->pre_type()),
              t_load, c_load);
  std::printf("rates below are per CPU second of this process (single thread)\n");

  std::vector<int32_t> ids;
  for (int pass = 0; pass < 3; ++pass) {
    t0 = Cpu();
    ids = (*tok)->Encode(text, /*parse_special=*/true, /*add_special=*/false);
    const double dt = Cpu() - t0;
    std::printf("encode pass %d (%s): %.2f MB in %.3f s = %.1f MB/s, %zu tokens (%.2f bytes/token, %.2f M tok/s)\n",
                pass, pass == 0 ? "cold piece cache" : "warm piece cache", text_mb, dt, text_mb / dt, ids.size(),
                static_cast<double>(text.size()) / static_cast<double>(ids.size()), ids.size() / dt / 1e6);
  }
  // Many short requests, like a server's (1 KB each).
  t0 = Cpu();
  size_t n_short = 0;
  for (size_t pos = 0; pos + 1024 <= text.size(); pos += 1024) n_short += (*tok)->Encode(std::string_view(text).substr(pos, 1024), true, false).size();
  double dt = Cpu() - t0;
  std::printf("encode 1 KB chunks: %.1f MB/s (%zu tokens)\n", text_mb / dt, n_short);

  t0 = Cpu();
  const std::string back = (*tok)->Decode(ids);
  dt = Cpu() - t0;
  std::printf("decode: %.1f MB/s, round trip %s\n", text_mb / dt, back == text ? "exact" : "DIFFERS");
  t0 = Cpu();
  rw::tokenizer::StreamDecoder stream(**tok);
  size_t streamed = 0;
  for (int32_t id : ids) streamed += stream.Feed(id).size();
  streamed += stream.Flush().size();
  dt = Cpu() - t0;
  std::printf("stream decode: %.1f M tok/s (%zu bytes)\n", ids.size() / dt / 1e6, streamed);
  return back == text ? 0 : 1;
}
