// Internal to model/: the per-layer forward functions over a whole batch, and the GDN state update shared by
// Forward and ReplayState.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "kernels/thread_pool.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/kv_storage.h"
#include "model/state_storage.h"
#include "model/weights.h"

namespace rw::model::internal {

// A BatchSeq resolved to rows of the batch: rows [row0, row0 + n) hold positions [pos0, pos0 + n).
struct SeqRun {
  int32_t row0 = 0;
  int32_t n = 0;
  int32_t pos0 = 0;
  int32_t slot = 0;  // state_out
  std::span<const int32_t> pages;
  int32_t slot_in = -1;  // state to start from when it is another slot (read, never written); -1: `slot` itself
  const ReplaySeqLog* prefix = nullptr;  // replay rows applied before the tokens (BatchSeq::prefix)
  int32_t prefix_rows = 0;
  const SeqImages* images = nullptr;     // BatchSeq::images (rotary positions of image layouts)
};

// Inputs of the GDN state update for T consecutive tokens of one sequence.
struct GdnInputs {
  const float* qkv = nullptr;  // [T][qkv_stride], first C values = raw qkv projection (pre-conv)
  int64_t qkv_stride = 0;
  const float* b = nullptr;    // [T][ba_stride], first Hv values (pre-sigmoid)
  const float* a = nullptr;    // [T][ba_stride], first Hv values (pre-softplus)
  int64_t ba_stride = 0;
  int32_t T = 0;
};

// Conv window + conv + silu + L2 norm + gates + delta rule, token by token (spec 7.4 steps 2-5). Writes the core
// output o [T][Vd] when o is not null. The only code that changes a GDN state.
// conv_in / delta_in (optional): start from this state instead of conv_state / delta_state (which receive the
// result); the copy is fused into the first token's update (same bits as copying first).
// out_from: o receives the rows of tokens t >= out_from only, at o + (t - out_from) * Vd.
void GdnUpdate(const ModelConfig& cfg, const GdnWeights& w, const GdnInputs& in, float* conv_state,
               float* delta_state, float* o, kernels::ThreadPool* pool, const float* conv_in = nullptr,
               const float* delta_in = nullptr, int32_t out_from = 0);

// One conv output row [q Kd | k Kd | v Vd] of GdnUpdate / KdaUpdate in place: SiLU, then q and k L2-normalised
// per key head; q_used false: a row whose q is never read (replay, no output) leaves q as it is.
void ActivateQkvRow(const ModelConfig& cfg, float* row, bool q_used);

// The delta rule of T tokens for every value head h (kernels::GdnHeadSteps; heads in parallel, tokens in order),
// shared by GdnUpdate and KdaUpdate: u [T][C = ssm_conv_dim()] rows of q (Kd) | k (Kd) | v (Vd), q and k
// L2-normalised, head h reading key head KeyHead(h); beta [T][Hv]; the decay per head exp(g) with g [T][Hv] (GDN)
// or, when dec is set, per key channel dec [T][Hv·S] (KDA, g unused). delta_in / o / out_from as for GdnUpdate.
void DeltaRuleHeads(const ModelConfig& cfg, const float* u, int32_t T, const float* beta, const float* g,
                    const float* dec, float* delta_state, const float* delta_in, float* o, int32_t out_from,
                    kernels::ThreadPool* pool);

// Inputs of the Mamba-2 state update for T consecutive tokens of one sequence (one replay-log row per token:
// the raw conv input x|B|C, then dt).
struct Mamba2Inputs {
  const float* xbc = nullptr;  // [T][stride], first C values = raw x | B | C (pre-conv)
  const float* dt = nullptr;   // [T][stride], first H values (before dt_bias and softplus)
  int64_t stride = 0;
  int32_t T = 0;
};

// Conv window + conv (+ bias) + silu, dt softplus, the selective-state recurrence token by token and the D skip.
// Writes y [T - out_from][d_inner] (before the gate and the norm) when y is not null. The only code that changes
// a Mamba-2 state; conv_in / ssm_in / out_from as for GdnUpdate.
void Mamba2Update(const ModelConfig& cfg, const Mamba2Weights& w, const Mamba2Inputs& in, float* conv_state,
                  float* ssm_state, float* y, kernels::ThreadPool* pool, const float* conv_in = nullptr,
                  const float* ssm_in = nullptr, int32_t out_from = 0);

// LFM2 short convolution of T consecutive tokens of one sequence: bx [T][stride] (first E values: B ⊙ x, the
// replay-log row) through the conv window, strictly token by token. Writes the conv output u [T - out_from][E]
// (before the C gate) when u is not null. The only code that changes a short-conv state; conv_in / out_from as
// for GdnUpdate.
void ShortConvUpdate(const ModelConfig& cfg, const ShortConvWeights& w, const float* bx, int64_t stride, int32_t T,
                     float* conv_state, float* u, kernels::ThreadPool* pool, const float* conv_in = nullptr,
                     int32_t out_from = 0);

// Inputs of the KDA state update for T consecutive tokens of one sequence: raw q, k, v (pre-conv), beta
// (pre-sigmoid) and the gate projection f_b·f_a·x (before dt_bias), each row t at base + t·stride.
struct KdaInputs {
  const float* x[3] = {};  // q, k, v: [T][x_stride], first H·S values
  int64_t x_stride = 0;
  const float* beta = nullptr;  // first H values
  int64_t beta_stride = 0;
  const float* gate = nullptr;  // first H·S values
  int64_t gate_stride = 0;
  int32_t T = 0;
};
// The same inputs read from T replay-log rows [q | k | v | beta | gate] of `stride` floats apart.
KdaInputs KdaReplayInputs(const ModelConfig& cfg, const float* rows, int64_t stride, int32_t T);
// Conv windows + convs + silu + L2 norms + per-channel decays + the delta rule, token by token. Writes the core
// output o [T - out_from][H·S] when o is not null. The only code that changes a KDA state; conv_in / delta_in /
// out_from as for GdnUpdate.
void KdaUpdate(const ModelConfig& cfg, const KdaWeights& w, const KdaInputs& in, float* conv_state,
               float* delta_state, float* o, kernels::ThreadPool* pool, const float* conv_in = nullptr,
               const float* delta_in = nullptr, int32_t out_from = 0);

// A part of each batch row that goes into a recurrent layer's replay-log row: row i is base + i·stride, width
// floats. A replay row is the concatenation of the pieces.
struct RowPiece {
  const float* base = nullptr;
  int64_t stride = 0;
  int32_t width = 0;
};
// The replay log of recurrent layer rec_index for every sequence: a replay prefix's logged rows first, then the
// batch's rows.
void RecordReplayRows(const ModelConfig& cfg, int32_t rec_index, std::span<const SeqRun> seqs,
                      std::span<const RowPiece> pieces, ReplayLog* replay);
// Lazy rollback: the s.prefix_rows logged rows of s.prefix, then s's batch rows, as one run of replay rows
// [P + n][replay_row_floats] (a thread-local buffer, valid until the next call).
const float* JoinPrefixRows(const ModelConfig& cfg, int32_t rec_index, const SeqRun& s,
                            std::span<const RowPiece> pieces);

// Mixers and FFN over all N rows of a batch; `out` [N][E] receives the block output (not yet added).
void GdnForward(const ModelConfig& cfg, const GdnWeights& w, int32_t gdn_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                kernels::ThreadPool* pool);
// kv_only: write the batch's K/V rows to the pages and stop (no queries, no attention, `out` untouched).
void AttentionForward(const ModelConfig& cfg, const AttnWeights& w, int32_t attn_index, const float* t,
                      int32_t N, std::span<const SeqRun> seqs, KvStorage& kv, float* out,
                      kernels::ThreadPool* pool, bool kv_only = false);
void Mamba2Forward(const ModelConfig& cfg, const Mamba2Weights& w, int32_t rec_index, const float* t, int32_t N,
                   std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                   kernels::ThreadPool* pool);
void ShortConvForward(const ModelConfig& cfg, const ShortConvWeights& w, int32_t rec_index, const float* t,
                      int32_t N, std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                      kernels::ThreadPool* pool);
void KdaForward(const ModelConfig& cfg, const KdaWeights& w, int32_t rec_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, StateStorage& states, ReplayLog* replay, float* out,
                kernels::ThreadPool* pool);
// kimi-linear MLA (absorbed, no RoPE): the latent row [kv_a normed | k_pe] is cached as K and as V (mla_layer.cc).
void MlaForward(const ModelConfig& cfg, const MlaWeights& w, int32_t attn_index, const float* t, int32_t N,
                std::span<const SeqRun> seqs, KvStorage& kv, float* out, kernels::ThreadPool* pool);
// Softmax attention of every batch row's Hq query heads q [N][Hq·D] over its sequence's cached rows (Hkv heads of
// D, GQA groups), positions [0, pos + 1); att [N][Hq·D]. Shared by AttentionForward and MlaForward.
void AttendRows(const float* q, int32_t Hq, int32_t Hkv, int32_t D, float scale, int32_t attn_index,
                std::span<const SeqRun> seqs, std::span<const int32_t> row_pos, const KvStorage& kv, float* att,
                kernels::ThreadPool* pool);
// Writes the K and V rows (row_width floats each) of position pos of sequence s to its page.
void StoreKvRow(KvStorage& kv, int32_t attn_index, const SeqRun& s, int32_t pos, const float* k, const float* v);
// The model's RoPE settings for kernels::RopeCache (shared by the CPU attention and the GPU backend's tables).
kernels::RopeParams MakeRope(const ModelConfig& c);
// The batch rows that get logits (each sequence's last token, all of them, or none) in output order; fills out's
// n_vocab, n_embd, row_seq, row_pos and seq_first_row (shared by the CPU and GPU forwards).
std::vector<int32_t> SelectOutputRows(const ModelConfig& c, std::span<const BatchSeq> batch,
                                      std::span<const SeqRun> seqs, ForwardOutput* out);
// Position of every batch row.
std::vector<int32_t> RowPositions(std::span<const SeqRun> seqs, int32_t N);

// The first product of an FFN as one MatMulJob on x [n][cols] that leaves the activated hidden rows in h
// [n][F]: silu(gate · x) ⊙ (up · x) when gate is set (u [n][F] receives up · x), else relu(up · x)² (u unused).
// *act receives the epilogue and must outlive the region.
kernels::MatMulJob FfnHiddenJob(const Matrix& gate, const Matrix& up, const float* x, int32_t n, float* h, float* u,
                                std::function<void(int64_t, int64_t)>* act);
// One expert's matrices (row slices of the stacked expert tensors); gate.data == nullptr: a ReLU² expert.
struct ExpertFfn {
  Matrix gate, up, down;
};
// Mixture of experts over N rows t [N][E]: sel, wt [N][K] the chosen experts and their weights; expert(e) gives
// expert e's matrices, run on the rows routed to it. All experts' first products run in one region and all
// their down products (with the jobs of extra_down, e.g. a shared expert's) in a second one, so at decode the
// active experts' rows are spread over all threads. out[i] = Σ_k wt[i][k]·y_k (each product rounded, summed in k
// order): a token's output depends on that token alone.
void RunExperts(int32_t N, int32_t K, int32_t X, int32_t E, const int32_t* sel, const float* wt, const float* t,
                float* out, const std::function<ExpertFfn(int32_t)>& expert,
                std::span<const kernels::MatMulJob> extra_down, kernels::ThreadPool* pool);
// down · (silu(gate · x) ⊙ (up · x)) (dense FFN and experts).
void SwiGluFfn(const Matrix& gate, const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
               kernels::ThreadPool* pool);
// down · relu(up · x)² (nemotron_h MLP and experts).
void ReluSqrFfn(const Matrix& up, const Matrix& down, const float* x, int32_t N, float* out,
                kernels::ThreadPool* pool);
// nemotron_h_moe / lfm2moe: sigmoid router with a selection bias, top-k, optional renormalisation and scale,
// ReLU² experts plus a ReLU² shared expert (nemotron_h_moe) or SwiGLU experts (lfm2moe) (experts.cc).
void SigmoidMoeForward(const ModelConfig& cfg, const FfnWeights& w, const float* t, int32_t N, float* out,
                       kernels::ThreadPool* pool);
// Dense SwiGLU / MoE (Qwen) or the ReLU² MLP / sigmoid MoE (nemotron_h, nemotron_h_moe).
void FfnForward(const ModelConfig& cfg, const FfnWeights& w, const float* t, int32_t N, float* out,
                kernels::ThreadPool* pool);

}  // namespace rw::model::internal
