// The MTP / NextN head (spec model-qwen35.md 5.7 and 8.1).
#include "model/mtp.h"

#include <string>

#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/binder.h"
#include "model/layers.h"

namespace rw::model {

Expected<MtpWeights> BindMtpWeights(const gguf::File& file, const ModelConfig& c, const Weights& trunk) {
  if (c.n_nextn < 1)
    return Error::Unsupported("the model has no MTP/NextN head (" + c.arch_name +
                              ".nextn_predict_layers is 0)");
  const internal::TensorBinder b(file, "blk." + std::to_string(c.n_layer) + ".", "MTP tensor");
  MtpWeights w;
  const int64_t E = c.n_embd, V = c.n_vocab;
  if (b.Has("nextn.embed_tokens.weight")) {
    REWIND_ASSIGN_OR_RETURN(w.embed, b.Mat("nextn.embed_tokens.weight", {E, V}));
  } else {
    w.embed = trunk.token_embd;
  }
  REWIND_ASSIGN_OR_RETURN(w.enorm, b.F32("nextn.enorm.weight", {E}));
  REWIND_ASSIGN_OR_RETURN(w.hnorm, b.F32("nextn.hnorm.weight", {E}));
  REWIND_ASSIGN_OR_RETURN(w.eh_proj, b.Mat("nextn.eh_proj.weight", {2 * E, E}));
  if (b.Has("nextn.shared_head_norm.weight")) {
    REWIND_ASSIGN_OR_RETURN(w.head_norm, b.F32("nextn.shared_head_norm.weight", {E}));
  } else {
    w.head_norm = trunk.output_norm;
  }
  if (b.Has("nextn.shared_head_head.weight")) {
    REWIND_ASSIGN_OR_RETURN(w.head, b.Mat("nextn.shared_head_head.weight", {E, V}));
  } else {
    w.head = trunk.output;
  }

  LayerWeights& L = w.block;
  REWIND_ASSIGN_OR_RETURN(L.attn_norm, b.F32("attn_norm.weight", {E}));
  REWIND_ASSIGN_OR_RETURN(L.post_norm, b.F32("post_attention_norm.weight", {E}));
  REWIND_RETURN_IF_ERROR(internal::BindAttention(b, c, &L.attn));
  REWIND_RETURN_IF_ERROR(internal::BindFfn(b, c, &L.ffn));
  return w;
}

Expected<std::unique_ptr<MtpHead>> MtpHead::Create(const Model& target) {
  std::unique_ptr<MtpHead> h(new MtpHead());
  h->cfg_ = target.config();
  REWIND_ASSIGN_OR_RETURN(h->w_, BindMtpWeights(target.file(), h->cfg_, target.weights()));
  return h;
}

KvStorageConfig MtpHead::MakeKvConfig(int32_t n_pages, int32_t page_size, KvTypes type) const {
  KvStorageConfig c;
  c.n_layers = 1;
  c.row_width = cfg_.n_head_kv * cfg_.head_dim;
  c.page_size = page_size;
  c.n_pages = n_pages;
  c.type = type;
  c.head_dim = cfg_.head_dim;
  return c;
}

Status MtpHead::Forward(const MtpRows& rows, KvStorage& kv, MtpOutputs outputs, MtpOutput* out,
                        kernels::ThreadPool* pool) const {
  const ModelConfig& c = cfg_;
  const int32_t E = c.n_embd, V = c.n_vocab;
  // ---- Validate before writing anything.
  if (rows.tokens.empty()) return Error::InvalidArgument("MTP: no tokens");
  if (rows.tokens.size() > (1u << 24)) return Error::OutOfRange("MTP: batch too large");
  const int32_t N = static_cast<int32_t>(rows.tokens.size());
  if (rows.pos0 < 0) return Error::InvalidArgument("MTP: negative start position");
  if (rows.hidden.size() != static_cast<size_t>(N) * E)
    return Error::InvalidArgument("MTP: hidden has " + std::to_string(rows.hidden.size()) +
                                  " floats, expected " + std::to_string(static_cast<int64_t>(N) * E));
  for (int32_t tok : rows.tokens)
    if (tok < 0 || tok >= V)
      return Error::InvalidArgument("MTP: token id " + std::to_string(tok) + " out of range [0, " +
                                    std::to_string(V) + ")");
  if (kv.config().n_layers < 1 || kv.config().row_width != c.n_head_kv * c.head_dim)
    return Error::InvalidArgument("MTP: KV storage is not shaped for the MTP head");
  const int64_t need = (static_cast<int64_t>(rows.pos0) + N + kv.page_size() - 1) / kv.page_size();
  if (static_cast<int64_t>(rows.pages.size()) < need)
    return Error::InvalidArgument("MTP: page table covers " + std::to_string(rows.pages.size()) +
                                  " pages, need " + std::to_string(need));
  for (int64_t p = 0; p < need; ++p)
    if (rows.pages[p] < 0 || rows.pages[p] >= kv.n_pages())
      return Error::InvalidArgument("MTP: page id " + std::to_string(rows.pages[p]) + " out of range");

  // ---- Input projection: u = eh_proj · [RMSNorm(Emb[x]; enorm) | RMSNorm(hin; hnorm)].
  std::vector<float> eh(static_cast<size_t>(N) * 2 * E);  // [N][e (E) | hh (E)]
  kernels::ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    std::vector<float> emb(E);
    for (int64_t i = i0; i < i1; ++i) {
      float* row = eh.data() + i * 2 * E;
      kernels::DequantizeRowTo(w_.embed, rows.tokens[i], emb.data());
      kernels::RmsNorm(emb.data(), w_.enorm, E, c.eps, row);
      kernels::RmsNorm(rows.hidden.data() + i * E, w_.hnorm, E, c.eps, row + E);
    }
  });
  std::vector<float> u(static_cast<size_t>(N) * E), t(u.size()), y(u.size());  // [N][E]
  kernels::MatMul(w_.eh_proj, eh.data(), N, u.data(), pool);

  auto norm_rows = [&](const float* weight) {
    kernels::ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        kernels::RmsNorm(u.data() + i * E, weight, E, c.eps, t.data() + i * E);
    });
  };
  const internal::SeqRun run{0, N, rows.pos0, 0, rows.pages};
  norm_rows(w_.block.attn_norm);
  internal::AttentionForward(c, w_.block.attn, 0, t.data(), N, std::span<const internal::SeqRun>(&run, 1), kv,
                             y.data(), pool, outputs == MtpOutputs::kKvOnly);
  out->n_vocab = V;
  out->n_embd = E;
  if (outputs == MtpOutputs::kKvOnly) {
    out->hn.clear();
    out->logits.clear();
    return Status::Ok();
  }
  for (size_t i = 0; i < u.size(); ++i) u[i] = u[i] + y[i];
  norm_rows(w_.block.post_norm);
  internal::FfnForward(c, w_.block.ffn, t.data(), N, y.data(), pool);
  for (size_t i = 0; i < u.size(); ++i) u[i] = u[i] + y[i];

  const int32_t first = outputs == MtpOutputs::kLastRow ? N - 1 : 0;
  const int32_t n_out = N - first;
  out->hn.resize(static_cast<size_t>(n_out) * E);
  for (int32_t r = 0; r < n_out; ++r)
    kernels::RmsNorm(u.data() + static_cast<int64_t>(first + r) * E, w_.head_norm, E, c.eps,
                     out->hn.data() + static_cast<int64_t>(r) * E);
  kernels::Matrix head = w_.head;
  if (head_rows_ > 0 && head_rows_ < head.n_rows) head.n_rows = head_rows_;
  out->n_vocab = static_cast<int32_t>(head.n_rows);
  out->logits.resize(static_cast<size_t>(n_out) * head.n_rows);
  kernels::MatMul(head, out->hn.data(), n_out, out->logits.data(), pool);
  return Status::Ok();
}

}  // namespace rw::model
