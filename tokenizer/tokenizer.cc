#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "base/hex.h"
#include "base/log.h"
#include "gguf/gguf.h"
#include "tokenizer/unicode.h"

namespace rw::tokenizer {
namespace {

uint32_t TypeToAttr(int64_t type) {
  switch (type) {
    case 1: return kAttrNormal;
    case 2: return kAttrUnknown;
    case 3: return kAttrControl;
    case 4: return kAttrUserDefined;
    case 5: return kAttrUnused;
    case 6: return kAttrByte;
    default: return kAttrUndefined;
  }
}

bool IsIntegerType(gguf::ValueType t) {
  switch (t) {
    case gguf::ValueType::kUint8: case gguf::ValueType::kUint16: case gguf::ValueType::kUint32:
    case gguf::ValueType::kUint64: case gguf::ValueType::kInt8: case gguf::ValueType::kInt16:
    case gguf::ValueType::kInt32: case gguf::ValueType::kInt64:
      return true;
    default:
      return false;
  }
}

// llama_decode_text: byte-level alphabet back to bytes.
std::string DecodeNormalText(const std::string& text) {
  std::vector<uint32_t> cpts;
  DecodeUtf8Lenient(text, &cpts);
  std::string out;
  out.reserve(text.size());
  for (uint32_t cpt : cpts) {
    const int byte = UnicodeToByte(cpt);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
      continue;
    }
    std::string utf8;
    AppendUtf8(cpt, &utf8);
    out += "[UNK_BYTE_0x" + HexBytes(utf8);
    out += text + "]";  // sic: llama.cpp appends the whole token text
  }
  return out;
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const gguf::File& file) {
  std::unique_ptr<Tokenizer> tok(new Tokenizer());
  REWIND_RETURN_IF_ERROR(tok->Load(file));
  return tok;
}

Status Tokenizer::Load(const gguf::File& file) {
  REWIND_ASSIGN_OR_RETURN(std::string model, file.GetString("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return Error::Unsupported("tokenizer.ggml.model is '" + model + "'; rewind supports only 'gpt2' (byte-level BPE)");
  }
  if (!file.Has("tokenizer.ggml.pre")) {
    return Error::Unsupported(
        "tokenizer.ggml.pre is missing (llama.cpp would fall back to the 'default' pre-tokenizer); rewind supports "
        "qwen2 and qwen35");
  }
  REWIND_ASSIGN_OR_RETURN(std::string pre, file.GetString("tokenizer.ggml.pre"));
  if (!ParsePreType(pre, &pre_)) {
    return Error::Unsupported("unknown pre-tokenizer tokenizer.ggml.pre = '" + pre +
                              "'; rewind supports qwen2 (and deepseek-r1-qwen, kormo, f2llmv2, megrez) and qwen35");
  }

  REWIND_ASSIGN_OR_RETURN(tokens_, file.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens_.empty()) return Error::Corrupt("tokenizer.ggml.tokens is empty");
  if (tokens_.size() > static_cast<size_t>(INT32_MAX / 2)) return Error::OutOfRange("tokenizer.ggml.tokens too long");
  const size_t n = tokens_.size();
  attrs_.assign(n, kAttrNormal);
  if (file.Has("tokenizer.ggml.token_type")) {
    REWIND_ASSIGN_OR_RETURN(std::vector<int64_t> types, file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() < n) {
      return Error::Corrupt("tokenizer.ggml.token_type has " + std::to_string(types.size()) + " entries for " +
                            std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) attrs_[i] = TypeToAttr(types[i]);
  }
  token_ids_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (tokens_[i].empty()) tokens_[i] = "[EMPTY_" + std::to_string(i) + "]";
    token_ids_[tokens_[i]] = static_cast<int32_t>(i);  // a later duplicate wins, as in llama.cpp
  }

  REWIND_ASSIGN_OR_RETURN(std::vector<std::string> merges, file.GetStringArray("tokenizer.ggml.merges"));
  REWIND_RETURN_IF_ERROR(bpe_.Init(&token_ids_, merges));

  // Special ids from keys. BPE defaults: bos = eos = 11 when the vocabulary has it.
  if (n > 11) bos_ = eos_ = 11;
  const std::pair<const char*, int32_t*> keys[] = {
      {"tokenizer.ggml.bos_token_id", &bos_},          {"tokenizer.ggml.eos_token_id", &eos_},
      {"tokenizer.ggml.eot_token_id", &eot_},          {"tokenizer.ggml.eom_token_id", &eom_},
      {"tokenizer.ggml.unknown_token_id", &unk_},      {"tokenizer.ggml.seperator_token_id", &sep_},
      {"tokenizer.ggml.padding_token_id", &pad_},      {"tokenizer.ggml.mask_token_id", &mask_},
      {"tokenizer.ggml.fim_pre_token_id", &fim_pre_},  {"tokenizer.ggml.fim_suf_token_id", &fim_suf_},
      {"tokenizer.ggml.fim_mid_token_id", &fim_mid_},  {"tokenizer.ggml.fim_pad_token_id", &fim_pad_},
      {"tokenizer.ggml.fim_rep_token_id", &fim_rep_},  {"tokenizer.ggml.fim_sep_token_id", &fim_sep_},
      {"tokenizer.ggml.prefix_token_id", &fim_pre_},   {"tokenizer.ggml.suffix_token_id", &fim_suf_},
      {"tokenizer.ggml.middle_token_id", &fim_mid_},
  };
  for (const auto& [key, dst] : keys) {
    const gguf::Value* v = file.Find(key);
    if (!v) continue;
    if (!IsIntegerType(v->type)) return Error::Corrupt(std::string(key) + " is not an integer");
    const bool is_signed = v->type == gguf::ValueType::kInt8 || v->type == gguf::ValueType::kInt16 ||
                           v->type == gguf::ValueType::kInt32 || v->type == gguf::ValueType::kInt64;
    const int64_t id = is_signed ? v->i : static_cast<int64_t>(std::min<uint64_t>(v->u, INT64_MAX));
    if (id < 0 || id >= static_cast<int64_t>(n)) {
      LOG_WARN("tokenizer: %s = %lld is out of range, ignored", key, static_cast<long long>(id));
      continue;
    }
    *dst = static_cast<int32_t>(id);
  }
  for (const auto& [key, dst] : {std::pair<const char*, bool*>{"tokenizer.ggml.add_bos_token", &add_bos_},
                                 std::pair<const char*, bool*>{"tokenizer.ggml.add_eos_token", &add_eos_}}) {
    if (!file.Has(key)) continue;
    REWIND_ASSIGN_OR_RETURN(*dst, file.GetBool(key));
  }
  if (add_bos_ && bos_ < 0) return Error::Corrupt("tokenizer.ggml.add_bos_token is set but there is no BOS token");
  if (add_eos_ && eos_ < 0) return Error::Corrupt("tokenizer.ggml.add_eos_token is set but there is no EOS token");

  DeriveSpecialIds();

  pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t a = attrs_[i];
    if (a & (kAttrUnknown | kAttrControl | kAttrUserDefined)) {
      pieces_[i] = tokens_[i];
    } else if (a & kAttrNormal) {
      pieces_[i] = DecodeNormalText(tokens_[i]);
    } else if (a & kAttrByte) {
      // "<0xXX>" byte-fallback tokens.
      const std::string& t = tokens_[i];
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0) {
        pieces_[i] = std::string(1, static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
      }
    }
  }
  BuildSpecialIndex();
  std::vector<int32_t> nl = Encode("\n", false, false);
  newline_ = nl.empty() ? pad_ : nl[0];
  return Status::Ok();
}

void Tokenizer::DeriveSpecialIds() {
  auto find = [&](std::initializer_list<const char*> texts) -> int32_t {
    for (const char* t : texts) {
      auto it = token_ids_.find(t);
      if (it != token_ids_.end()) return it->second;
    }
    return -1;
  };
  auto detect = [&](int32_t* id, std::initializer_list<const char*> texts) {
    if (*id >= 0) return;
    *id = find(texts);
    if (*id >= 0) attrs_[*id] |= kAttrControl;  // control-looking token forced to CONTROL
  };
  // llama.cpp scans its hash map, so which candidate wins is unspecified there; the list order is used here,
  // which gives <|im_end|> (not <|endoftext|>) for Qwen, as llama.cpp reports for the reference vocabulary.
  detect(&eot_, {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
                 "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
                 "<end_of_utterance>"});
  detect(&eom_, {"<|eom_id|>"});
  detect(&fim_pre_, {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
                     "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>"});
  detect(&fim_suf_, {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
                     "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>"});
  detect(&fim_mid_, {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
                     "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>"});
  detect(&fim_pad_, {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
  detect(&fim_rep_, {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  detect(&fim_sep_, {"<|file_sep|>"});

  // CONTROL tokens whose text contains "unused" are unused.
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if ((attrs_[i] & kAttrControl) && tokens_[i].find("unused") != std::string::npos) attrs_[i] |= kAttrUnused;
  }

  // End-of-generation set.
  std::vector<int32_t> eog;
  for (int32_t id : {fim_pad_, fim_rep_, fim_sep_}) {
    if (id >= 0) eog.push_back(id);
  }
  static const char* const kEogTexts[] = {
      "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
      "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
      "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
      "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~["};
  for (const char* t : kEogTexts) {
    auto it = token_ids_.find(t);
    if (it == token_ids_.end()) continue;
    eog.push_back(it->second);
    attrs_[it->second] |= kAttrControl;
  }
  // gpt-oss: always rendered.
  for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"}) {
    auto it = token_ids_.find(t);
    if (it != token_ids_.end()) attrs_[it->second] = kAttrUserDefined;
  }
  for (int32_t id : {eos_, eot_, eom_}) {
    if (id >= 0) eog.push_back(id);
  }
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  // o200k_harmony / solar-open: <|end|> is not end-of-generation when <|return|>+<|call|> (or <|calls|>+<|flush|>)
  // are; gemma4: </s> is not when <|tool_response> is.
  auto in_eog = [&](const char* t) -> int32_t {
    auto it = token_ids_.find(t);
    return (it != token_ids_.end() && std::binary_search(eog.begin(), eog.end(), it->second)) ? it->second : -1;
  };
  const int32_t end_id = in_eog("<|end|>");
  const bool has_call = in_eog("<|call|>") >= 0 || in_eog("<|calls|>") >= 0;
  if (end_id >= 0 && has_call && (in_eog("<|return|>") >= 0 || in_eog("<|flush|>") >= 0)) {
    eog.erase(std::find(eog.begin(), eog.end(), end_id));
    attrs_[end_id] = kAttrUserDefined;
  }
  const int32_t s_id = in_eog("</s>");
  if (s_id >= 0 && in_eog("<|tool_response>") >= 0) {
    eog.erase(std::find(eog.begin(), eog.end(), s_id));
    attrs_[s_id] = kAttrNormal;
  }
  eog_ids_ = std::move(eog);
}

void Tokenizer::BuildSpecialIndex() {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (attrs_[i] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_tokens_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(special_tokens_.begin(), special_tokens_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  for (size_t k = 0; k < special_tokens_.size(); ++k) {
    const std::string& t = tokens_[special_tokens_[k]];
    const auto b0 = static_cast<uint8_t>(t[0]);
    special_first_byte_[b0] = true;
    if (t.size() == 1) {
      special_by_byte_[b0].push_back(static_cast<int32_t>(k));
    } else {
      special_by_prefix_[b0 | (static_cast<uint32_t>(static_cast<uint8_t>(t[1])) << 8)].push_back(
          static_cast<int32_t>(k));
    }
  }
}

bool Tokenizer::IsEog(int32_t id) const { return std::binary_search(eog_ids_.begin(), eog_ids_.end(), id); }

const std::string& Tokenizer::TokenText(int32_t id) const {
  static const std::string kEmpty;
  return IsValid(id) ? tokens_[id] : kEmpty;
}

std::optional<int32_t> Tokenizer::FindToken(std::string_view text) const {
  auto it = token_ids_.find(text);
  if (it == token_ids_.end()) return std::nullopt;
  return it->second;
}

std::string Tokenizer::TokenToPiece(int32_t id, bool unparse_special) const {
  if (!IsValid(id)) return {};
  if (!unparse_special && (attrs_[id] & (kAttrUnknown | kAttrControl))) return {};
  return pieces_[id];
}

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool unparse_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (!IsValid(id)) continue;
    if (!unparse_special && (attrs_[id] & (kAttrUnknown | kAttrControl))) continue;
    out += pieces_[id];
  }
  return out;
}

void Tokenizer::EncodeFragment(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<uint32_t> cpts;  // [n_cpts]
  cpts.reserve(text.size());
  const bool canonical = DecodeUtf8Lenient(text, &cpts);
  std::vector<uint32_t> lengths;
  std::vector<uint8_t> scratch;
  PreTokenize(pre_, cpts, &lengths, &scratch);
  // Pieces are re-encoded from code points (invalid bytes became U+FFFD, over-long forms shrink), as llama.cpp
  // does; for well-formed text that is the text itself.
  std::string canon_storage;
  if (!canonical) {
    canon_storage.reserve(text.size() + 8);
    for (uint32_t c : cpts) AppendUtf8(c, &canon_storage);
  }
  const std::string_view canon = canonical ? text : std::string_view(canon_storage);
  size_t cpt_pos = 0, byte_pos = 0;
  for (uint32_t len : lengths) {
    size_t bytes = 0;
    for (size_t k = cpt_pos; k < cpt_pos + len; ++k) {
      const uint32_t c = cpts[k];
      bytes += c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
    }
    bpe_.EncodeCached(canon.substr(byte_pos, bytes), out);
    cpt_pos += len;
    byte_pos += bytes;
  }
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool parse_special, bool add_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && add_bos_) out.push_back(bos_);

  // 1. Special-token occurrences. llama.cpp loops over the special tokens, longest first, and splits every
  // remaining raw fragment at each leftmost non-overlapping occurrence. Equivalent here: collect all
  // occurrences, then accept them token by token (priority order), left to right, skipping any that overlap
  // an accepted one of the same token or touch text already taken by an earlier token.
  struct Match {
    int32_t prio;
    uint32_t start, len;
  };
  std::vector<Match> matches;
  const size_t n = text.size();
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  auto allowed = [&](int32_t prio) {
    return parse_special || !(attrs_[special_tokens_[prio]] & (kAttrControl | kAttrUnknown));
  };
  if (!special_tokens_.empty()) {
    for (size_t i = 0; i < n; ++i) {
      if (!special_first_byte_[s[i]]) continue;
      if (auto it = special_by_byte_.find(s[i]); it != special_by_byte_.end()) {
        for (int32_t prio : it->second) {
          if (allowed(prio)) matches.push_back({prio, static_cast<uint32_t>(i), 1});
        }
      }
      if (i + 1 >= n) continue;
      auto it = special_by_prefix_.find(s[i] | (static_cast<uint32_t>(s[i + 1]) << 8));
      if (it == special_by_prefix_.end()) continue;
      for (int32_t prio : it->second) {
        const std::string& t = tokens_[special_tokens_[prio]];
        if (t.size() <= n - i && std::memcmp(s + i, t.data(), t.size()) == 0 && allowed(prio)) {
          matches.push_back({prio, static_cast<uint32_t>(i), static_cast<uint32_t>(t.size())});
        }
      }
    }
  }
  if (matches.empty()) {
    if (n > 0) EncodeFragment(text, &out);
  } else {
    std::sort(matches.begin(), matches.end(), [](const Match& a, const Match& b) {
      return a.prio != b.prio ? a.prio < b.prio : a.start < b.start;
    });
    std::vector<uint8_t> taken(n, 0);  // [n_bytes]
    std::vector<Match> accepted;
    size_t last_end = 0;
    int32_t cur_prio = -1;
    for (const Match& m : matches) {
      if (m.prio != cur_prio) {
        cur_prio = m.prio;
        last_end = 0;
      }
      if (m.start < last_end) continue;
      if (std::find(taken.begin() + m.start, taken.begin() + m.start + m.len, 1) != taken.begin() + m.start + m.len) {
        continue;
      }
      std::fill(taken.begin() + m.start, taken.begin() + m.start + m.len, 1);
      last_end = m.start + m.len;
      accepted.push_back(m);
    }
    std::sort(accepted.begin(), accepted.end(), [](const Match& a, const Match& b) { return a.start < b.start; });
    size_t pos = 0;
    for (const Match& m : accepted) {
      if (m.start > pos) EncodeFragment(text.substr(pos, m.start - pos), &out);
      out.push_back(special_tokens_[m.prio]);
      pos = m.start + m.len;
    }
    if (pos < n) EncodeFragment(text.substr(pos), &out);
  }

  if (add_special && add_eos_) out.push_back(eos_);
  return out;
}

}  // namespace rw::tokenizer
