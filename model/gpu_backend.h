// The Vulkan forward (docs/gpu.md), internal to model/: the device copy of the weights and the backend that
// records each layer with the gpu/ kernels. gpu_backend.cc runs the forward (GDN, attention, states, replay),
// gpu_ffn.cc the FFN blocks (dense SwiGLU, the MoE of qwen35moe and qwen3next).
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/ops.h"
#include "gpu/seq_ops.h"
#include "model/forward_backend.h"
#include "model/gpu_storage.h"

namespace rw::model::vk {

using gpu::Buffer;
using gpu::Context;
using gpu::GpuMatrix;
using gpu::Groups;

struct GpuLayer {
  Buffer attn_norm, post_norm;
  GpuMatrix qkv, gate, beta, alpha, gdn_out;  // GDN
  GpuMatrix in, ba;                           // qwen3next: fused ssm_in (legacy files) and ssm_ba
  Buffer dt_bias, ssm_a, conv, norm;
  GpuMatrix q, k, v, attn_out;  // attention
  Buffer q_norm, k_norm;
  GpuMatrix ffn_gate, ffn_up, ffn_down;  // dense FFN
  // MoE: router {E, X}; the stacked experts (gate_exps holds the fused gate_up tensor when fused_gate_up); the
  // shared expert and its gate row.
  GpuMatrix router, gate_exps, up_exps, down_exps, shexp_gate_inp, shexp_gate, shexp_up, shexp_down;
  bool fused_gate_up = false;
};

Expected<Buffer> UploadFloats(Context& c, const float* p, size_t n);
// A weight in its GGUF format (gpu::UploadMatrix; row_group: an expert's rows of a stacked expert tensor).
Expected<GpuMatrix> UploadWeight(Context& c, const Matrix& m, const std::string& what, int64_t row_group = 1);

// Device buffers sized for the largest batch so far (grow only).
struct Grown {
  Buffer buf;
  Status Ensure(Context& c, size_t bytes) {
    if (buf.valid() && buf.size() >= bytes) return Status::Ok();
    REWIND_RETURN_IF_ERROR(c.Submit());
    REWIND_ASSIGN_OR_RETURN(buf, c.Alloc(std::max<size_t>(bytes, 16)));
    return Status::Ok();
  }
};

class VulkanBackend final : public ForwardBackend {
 public:
  VulkanBackend(std::shared_ptr<Context> ctx, const ModelConfig& cfg, const Weights& w)
      : ctx_(std::move(ctx)), cfg_(cfg), w_(w) {}

  Status Upload();
  // Forces an attention kernel (gpu/seq_ops.h; every variant gives the same bits).
  void set_attention_kernel(gpu::AttentionKernel k) { attn_kernel_ = k; }
  void set_attention_split(gpu::AttentionSplit s) { attn_split_ = s; }
  std::string name() const override { return "vulkan" + std::to_string(ctx_->info().index); }
  std::string description() const override {
    return name() + " (" + ctx_->info().name + ", " + std::to_string(ctx_->info().memory_bytes >> 20) + " MiB)";
  }
  uint64_t device_bytes() const override { return ctx_->allocated_bytes(); }
  uint64_t forward_bytes(int32_t rows, int32_t out_rows) const override;
  std::string device_type() const override { return ctx_->info().type; }
  uint64_t device_memory_total() const override { return ctx_->info().memory_bytes; }
  uint64_t max_buffer_bytes() const override { return ctx_->max_buffer_bytes(); }
  Status Place(KvStorage& kv, StateStorage& states) override {
    if (cfg_.n_attn_layers() > 0) REWIND_RETURN_IF_ERROR(AttachKv(kv));
    REWIND_RETURN_IF_ERROR(AttachStates(states));
    placed_kv_ = kvd_ != nullptr ? kvd_->device_bytes() : 0;
    placed_states_ = st_->device_bytes();
    return Status::Ok();
  }
  uint64_t device_kv_bytes() const override { return placed_kv_; }
  uint64_t device_weights_bytes() const override { return weights_bytes_; }
  uint64_t device_state_bytes() const override { return placed_states_; }
  Status Forward(std::span<const BatchSeq> batch, std::span<const internal::SeqRun> seqs, int32_t N,
                 KvStorage& kv, StateStorage& states, ForwardOutput* out, ReplayLog* replay, int32_t top_k) override;
  Status ReplayState(int32_t slot_in, int32_t slot_out, const ReplaySeqLog& log, int32_t k,
                     StateStorage& states) override;
  Status AppendReplay(ReplaySeqLog& dst, const ReplaySeqLog& tail) override;
  uint64_t replay_bytes_to_device() const override { return replay_pool_ ? replay_pool_->to_device : 0; }
  DeviceCounters device_counters() const override {
    return {ctx_->dispatches(), ctx_->submits(), ctx_->flushes(), ctx_->wait_seconds(), ctx_->barriers()};
  }
  Status SetProfiling(bool on) override { return ctx_->SetProfiling(on); }
  std::vector<DeviceProfileRow> TakeProfile() override {
    std::vector<DeviceProfileRow> rows;
    for (const gpu::ProfileRow& r : ctx_->TakeProfile()) rows.push_back({r.name, r.count, r.seconds});
    return rows;
  }

 private:
  // A hidden-size norm of `rows` token rows into o; add (not null): x += add first, in the same dispatch (the
  // residual add before a norm). next: the matrix the first matmul after it multiplies o by: the norm's dispatch
  // also converts o for it (gpu::RecordRmsNormForMatMul), so every matmul reading o passes same_x.
  Status Norm(Buffer& x, uint32_t rows, uint32_t n, const Buffer& w, Buffer& o, const Buffer* add,
              const GpuMatrix& next) {
    return gpu::RecordRmsNormForMatMul(*ctx_, x, rows, n, w, cfg_.eps, o, add, next.type, act_);
  }
  // The first matrix a layer's mixer (GDN or attention) multiplies its normed input by, and its FFN's.
  static const GpuMatrix& FirstMixerMatrix(const GpuLayer& L) {
    return L.in.valid() ? L.in : L.ba.valid() ? L.ba : L.qkv.valid() ? L.qkv : L.q;
  }
  const GpuMatrix& FirstFfnMatrix(const GpuLayer& L) const { return cfg_.is_moe() ? L.shexp_gate : L.ffn_gate; }
  // same_x: x is unchanged since the previous matmul read it (its quantised rows are reused: gpu::MatMulReuse).
  Status Mat(const GpuMatrix& m, const Buffer& x, int32_t N, Buffer& y, bool same_x = false) {
    return gpu::RecordMatMul(*ctx_, m, x, 0, N, y, 0, static_cast<uint32_t>(m.n_rows), act_, {same_x, false});
  }
  Status Elt(Buffer& a, const Buffer& b, uint32_t rows, uint32_t width, uint32_t a_stride, uint32_t b_off,
             uint32_t b_stride, uint32_t mode);
  struct ReplayRun {
    const ReplaySeqLog* log = nullptr;
    int32_t rows = 0;   // the first `rows` logged tokens
    int32_t state = 0;  // the state slot it changes (DeviceStates)
  };
  Status CopyRows(const Buffer& src, uint32_t src_off, uint32_t src_stride, Buffer& dst, uint32_t dst_off,
                  uint32_t dst_stride, uint32_t rows, uint32_t width);
  Status GdnStateUpdate(const GpuLayer& L, int32_t gi, int32_t rows, int32_t n_seqs, uint32_t max_n, const Buffer& tab);
  Status GdnLayer(const GpuLayer& L, int32_t gi, int32_t N, int32_t n_seqs, uint32_t max_n, bool record);
  Status ReplayPass(std::span<const ReplayRun> runs);
  // A log's rows on this device: its DeviceReplayRows (an error for one of another device); null for host rows.
  Expected<const DeviceReplayRows*> DeviceRows(const ReplaySeqLog& log) const;
  // Device buffers for a log of `layer_bytes` per GDN layer (from the pool).
  Expected<std::unique_ptr<DeviceReplayRows>> NewLog(size_t layer_bytes);
  Status EnsureRows(int32_t N);
  template <typename F>
  void ForEachRowBuffer(size_t n, F&& f) const;
  // The device slots of `states` (made and attached on first use): st_ for this call.
  Status AttachStates(StateStorage& states);
  // The device pages of `kv` (made and attached on first use): kvd_ for this call.
  Status AttachKv(KvStorage& kv);
  Status AttnLayer(const GpuLayer& L, int32_t ai, int32_t N, uint32_t max_pos);
  // FFN (model/gpu_ffn.cc): the weights of layer il, and the block on t_ into y_: dense SwiGLU or the MoE.
  Status UploadFfn(int32_t il, GpuLayer& G);
  Status FfnBlock(const GpuLayer& L, int32_t N);
  Status MoeBlock(const GpuLayer& L, int32_t N);
  // qwen3next: the fused projections split into qkv_ / z_ and b_ / a_ (gdn_split.comp).
  Status SplitFused(const GpuLayer& L, int32_t N);

  std::shared_ptr<Context> ctx_;
  const ModelConfig& cfg_;
  const Weights& w_;
  std::vector<GpuLayer> layers_;
  GpuMatrix output_;
  Buffer output_norm_;
  gpu::ActScratch act_;
  gpu::TopLogitsScratch top_;  // the top-k passes' pairs (ForwardOptions::top_k)
  gpu::AttentionKernel attn_kernel_ = gpu::AttentionKernel::kAuto;  // REWIND_GPU_ATTENTION (MakeVulkanBackend)
  gpu::AttentionSplit attn_split_ = gpu::AttentionSplit::kAuto;     // REWIND_GPU_ATTENTION_SPLIT
  KvTypes kv_types_;  // this forward's KV cache types (the pools hold the CPU's bytes of them)
  // Per forward: [N][E] residual / normed / block output, and the layer scratch.
  Grown x_, t_, y_, qkv_, z_, b_, a_, u_, o_, qg_, k_, v_, q_, att_, fg_, fu_, hn_, logits_, rope_, seq_tab_,
      row_tab_, replay_tab_, replay_in_, attn_ml_, fused_, scatter_tab_, page_tab_;
  std::shared_ptr<ReplayPool> replay_pool_;  // the device buffers of the logs this backend records
  // MoE per forward: router logits [N][X], chosen experts [N][K] (int32), their weights [N][K], expert hidden
  // rows [N·K][F] (gate, up), expert outputs [N·K][E], shared expert output [N][E] and gate logit [N].
  Grown moe_logits_, moe_sel_, moe_wt_, moe_h_, moe_u_, moe_y_, sh_y_, sh_g_;
  // Per recurrent layer: the forward's replay rows [N][C | b | a] (copied into each sequence's log).
  std::vector<Grown> log_;
  DeviceStates* st_ = nullptr;        // the states of the running call
  DeviceKv* kvd_ = nullptr;           // its KV pages
  uint64_t placed_kv_ = 0, placed_states_ = 0;  // device bytes of the storages placed last (Place)
  uint64_t weights_bytes_ = 0;                  // what Upload allocated
  uint32_t n_scatter_ = 0;  // rows in scatter_tab_ this forward
  uint32_t page_rows_ = 1;  // rows per KV page (attention's page lists in page_tab_)
};

}  // namespace rw::model::vk
