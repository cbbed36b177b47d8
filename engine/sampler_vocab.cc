// SamplerVocab from a model's tokenizer: the text of every token (control tokens empty: a grammar never
// matches them), its end-of-generation tokens and plain-text encoding for DRY's sequence breakers.
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace rw::engine {

SamplerVocab MakeSamplerVocab(std::shared_ptr<const tokenizer::Tokenizer> tok) {
  SamplerVocab v;
  v.eog = tok->eog_ids();
  v.pieces.resize(static_cast<size_t>(tok->n_vocab()));
  for (int32_t i = 0; i < tok->n_vocab(); ++i)
    if (!tok->IsControl(i)) v.pieces[i] = tok->TokenToPiece(i, /*unparse_special=*/true);
  v.encode = [tok](std::string_view text) {
    return tok->Encode(text, /*parse_special=*/false, /*add_special=*/false);
  };
  return v;  // the trie is built on first use (BuildTrie): most servers never see a grammar
}

}  // namespace rw::engine
