// Test helpers: loading the vocabularies under tests/data (tokenizer tests only).
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/file.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace rw::tokenizer::testing {

inline std::string DataPath(const std::string& rel) { return std::string(REWIND_TEST_DATA) + "/" + rel; }

// Replaces the string value of tokenizer.ggml.pre in a GGUF image ("" if the key is not found).
inline std::string WithPre(std::string s, const std::string& pre) {
  const std::string key = "tokenizer.ggml.pre";
  const size_t k = s.find(key);
  if (k == std::string::npos) return {};
  const size_t len_at = k + key.size() + 4;  // after the key: u32 type (string), then u64 length and the bytes
  if (len_at + 8 > s.size()) return {};
  uint64_t old_len = 0;
  for (int i = 0; i < 8; ++i) old_len |= static_cast<uint64_t>(static_cast<uint8_t>(s[len_at + i])) << (8 * i);
  if (old_len > 64) return {};
  std::string repl(8, '\0');
  const uint64_t n = pre.size();
  for (int i = 0; i < 8; ++i) repl[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  repl += pre;
  s.replace(len_at, 8 + old_len, repl);
  return s;
}

// The 151,936-token Qwen2 vocabulary of llama.cpp's models/ggml-vocab-qwen35.gguf. The qwen2 fixture of
// llama.cpp is the same file byte for byte except tokenizer.ggml.pre, so it is derived by patching that string.
inline std::string VocabBytes(const std::string& pre) {
  auto bytes = ReadFileToString(DataPath("tokenizer/ggml-vocab-qwen35.gguf"));
  if (!bytes.ok()) return {};
  return WithPre(std::move(bytes).value(), pre);
}

inline std::unique_ptr<gguf::File> OpenBytes(const std::string& bytes) {
  auto f = gguf::File::FromBuffer(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!f.ok()) {
    std::fprintf(stderr, "gguf: %s\n", f.error().ToString().c_str());
    return nullptr;
  }
  return std::move(f).value();
}

inline std::unique_ptr<Tokenizer> LoadQwenVocab(const std::string& pre) {
  auto file = OpenBytes(VocabBytes(pre));
  if (!file) return nullptr;
  auto tok = Tokenizer::FromGguf(*file);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer: %s\n", tok.error().ToString().c_str());
    return nullptr;
  }
  return std::move(tok).value();
}

// Loaded once per process and pre-tokenizer (loading the 151,936-token vocabulary takes a fraction of a second).
inline const gguf::File* SharedQwenVocabFile(const std::string& pre) {
  static std::map<std::string, std::unique_ptr<gguf::File>> files;
  auto& f = files[pre];
  if (!f) f = OpenBytes(VocabBytes(pre));
  return f.get();
}

inline const Tokenizer* SharedQwenTokenizer(const std::string& pre) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> toks;
  auto& t = toks[pre];
  if (!t) {
    const gguf::File* file = SharedQwenVocabFile(pre);
    if (!file) return nullptr;
    auto r = Tokenizer::FromGguf(*file);
    if (!r.ok()) {
      std::fprintf(stderr, "tokenizer: %s\n", r.error().ToString().c_str());
      return nullptr;
    }
    t = std::move(r).value();
  }
  return t.get();
}

// The tiny-qwen35 vocabulary (4,000 ids, Qwen3.x added tokens) of the reference models.
inline std::string TinyVocabPath() { return DataPath("vocab/tiny-qwen35-vocab.gguf"); }

inline std::string TinyVocabBytes() {
  auto r = ReadFileToString(TinyVocabPath());
  return r.ok() ? std::move(r).value() : std::string();
}

inline std::unique_ptr<Tokenizer> LoadTinyVocab() {
  auto file = gguf::File::Open(TinyVocabPath());
  if (!file.ok()) {
    std::fprintf(stderr, "gguf: %s\n", file.error().ToString().c_str());
    return nullptr;
  }
  auto tok = Tokenizer::FromGguf(**file);
  if (!tok.ok()) {
    std::fprintf(stderr, "tokenizer: %s\n", tok.error().ToString().c_str());
    return nullptr;
  }
  return std::move(tok).value();
}


}  // namespace rw::tokenizer::testing
