// rewind tokenize: text -> token ids with the model's tokenizer (docs/tokenizer.md).
#include <cstdio>
#include <string>

#include "apps/command.h"
#include "base/file.h"
#include "base/flags.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace rw::apps {
namespace {

// A piece for display: printable UTF-8 as is; \n \r \t \\ escaped; other control and invalid bytes as \xNN.
std::string Printable(const std::string& piece) {
  std::string out;
  size_t i = 0;
  while (i < piece.size()) {
    const auto c = static_cast<unsigned char>(piece[i]);
    const size_t len = tokenizer::ValidUtf8SequenceLength(piece, i);
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c == '\\') out += "\\\\";
    else if (len > 1) {
      out.append(piece, i, len);
      i += len;
      continue;
    } else if (c >= 0x20 && c < 0x7F) out += static_cast<char>(c);
    else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
    ++i;
  }
  return out;
}

int CmdTokenize(int argc, char** argv) {
  std::string model, file, text;
  bool special = true, pieces = false;
  FlagSet flags("rewind tokenize", "Prints the token ids of TEXT (or of --file) on one line, space-separated. "
                                   "BOS/EOS are added only where the GGUF's add_bos/add_eos flags say so.");
  flags.Add("model", 'm', &model, "GGUF file whose tokenizer to use (required)");
  flags.Add("file", 'f', &file, "read the text from this file instead of the TEXT argument");
  flags.Add("special", 0, &special,
            "parse special tokens written in the text (<|im_start|> -> one id); --no-special treats CONTROL tokens "
            "as plain text (USER_DEFINED tokens such as <think> are always matched, as in llama.cpp)");
  flags.Add("pieces", 'p', &pieces, "print one token per line: id, tab, the token's text (escaped)");
  flags.Positional("TEXT", &text, "text to tokenize (use -- before text that starts with '-')", false);
  Status st = flags.Parse(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "rewind tokenize: %s\n", st.error().message.c_str());
    return 2;
  }
  if (flags.help_requested()) {
    std::printf("%s", flags.Help().c_str());
    return 0;
  }
  if (model.empty()) {
    std::fprintf(stderr, "rewind tokenize: --model is required (see rewind tokenize --help)\n");
    return 2;
  }
  if (!file.empty() && flags.IsSet("file") && !text.empty()) {
    std::fprintf(stderr, "rewind tokenize: give TEXT or --file, not both\n");
    return 2;
  }
  if (!file.empty()) {
    auto r = ReadFileToString(file);
    if (!r.ok()) {
      std::fprintf(stderr, "rewind tokenize: %s\n", r.error().ToString().c_str());
      return 1;
    }
    text = std::move(r).value();
  }
  auto gf = gguf::File::Open(model);
  if (!gf.ok()) {
    std::fprintf(stderr, "rewind tokenize: %s\n", gf.error().ToString().c_str());
    return 1;
  }
  auto tok = tokenizer::Tokenizer::FromGguf(**gf);
  if (!tok.ok()) {
    std::fprintf(stderr, "rewind tokenize: %s\n", tok.error().ToString().c_str());
    return 1;
  }
  const std::vector<int32_t> ids = (*tok)->Encode(text, special, /*add_special=*/true);
  if (pieces) {
    for (int32_t id : ids) std::printf("%d\t%s\n", id, Printable((*tok)->TokenToPiece(id, true)).c_str());
  } else {
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) line += ' ';
      line += std::to_string(ids[i]);
    }
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

REWIND_COMMAND("tokenize", "print the token ids of a text (--pieces: with their text)", CmdTokenize);

}  // namespace
}  // namespace rw::apps
