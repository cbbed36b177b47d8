// The Vulkan forward of the Qwen hybrids (qwen35 dense, qwen35moe, qwen3next: Gated DeltaNet + gated attention +
// a SwiGLU FFN or MoE, model/gpu_ffn.cc): every layer runs on the device with the gpu/ kernels; weights are uploaded once in their GGUF block formats. The host does the
// embedding lookup (one row per token), builds the RoPE cos/sin table with the CPU's kernels::RopeCache, and
// moves the batch's cached KV rows between the engine's KvStorage and device buffers around each forward. The
// recurrent states live on the device (model/gpu_storage.h): forwards read and write them in place (docs/gpu.md
// says what is not on the device yet).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/ops.h"
#include "gpu/seq_ops.h"
#include "kernels/kv_quant.h"
#include "kernels/matmul.h"
#include "kernels/rope.h"
#include "model/gpu_backend.h"

namespace rw::model {

namespace vk {

Expected<Buffer> UploadFloats(Context& c, const float* p, size_t n) {
  REWIND_ASSIGN_OR_RETURN(Buffer b, c.Alloc(4 * n));
  REWIND_RETURN_IF_ERROR(c.Upload(b, p, 4 * n));
  return b;
}

Expected<GpuMatrix> UploadWeight(Context& c, const Matrix& m, const std::string& what, int64_t row_group) {
  auto r = gpu::UploadMatrix(c, m.type, m.data, m.n_cols, m.n_rows, m.row_bytes, row_group);
  if (!r.ok()) return Error{r.error().kind, what + ": " + r.error().message};
  return r;
}

Status VulkanBackend::Upload() {
  Context& c = *ctx_;
  const uint64_t before = c.allocated_bytes();  // the context may be shared with another model (a drafter)
  layers_.resize(cfg_.n_layer);
  for (int32_t il = 0; il < cfg_.n_layer; ++il) {
    const LayerWeights& L = w_.layers[il];
    GpuLayer& G = layers_[il];
    const std::string at = "layer " + std::to_string(il) + " ";
    REWIND_ASSIGN_OR_RETURN(G.attn_norm, UploadFloats(c, L.attn_norm, cfg_.n_embd));
    REWIND_ASSIGN_OR_RETURN(G.post_norm, UploadFloats(c, L.post_norm, cfg_.n_embd));
    if (cfg_.kinds[il] == LayerKind::kGdn) {
      const GdnWeights& g = L.gdn;
      if (g.legacy_in) {
        REWIND_ASSIGN_OR_RETURN(G.in, UploadWeight(c, g.in, at + "ssm_in"));
      } else {
        REWIND_ASSIGN_OR_RETURN(G.qkv, UploadWeight(c, g.qkv, at + "attn_qkv"));
        REWIND_ASSIGN_OR_RETURN(G.gate, UploadWeight(c, g.gate, at + "attn_gate"));
      }
      if (g.ba.data != nullptr) {
        REWIND_ASSIGN_OR_RETURN(G.ba, UploadWeight(c, g.ba, at + "ssm_ba"));
      } else {
        REWIND_ASSIGN_OR_RETURN(G.beta, UploadWeight(c, g.beta, at + "ssm_beta"));
        REWIND_ASSIGN_OR_RETURN(G.alpha, UploadWeight(c, g.alpha, at + "ssm_alpha"));
      }
      REWIND_ASSIGN_OR_RETURN(G.gdn_out, UploadWeight(c, g.out, at + "ssm_out"));
      REWIND_ASSIGN_OR_RETURN(G.dt_bias, UploadFloats(c, g.dt_bias, cfg_.ssm_heads));
      REWIND_ASSIGN_OR_RETURN(G.ssm_a, UploadFloats(c, g.ssm_a, cfg_.ssm_heads));
      REWIND_ASSIGN_OR_RETURN(G.conv, UploadFloats(c, g.conv, static_cast<size_t>(cfg_.ssm_conv_dim()) * cfg_.ssm_conv_kernel));
      REWIND_ASSIGN_OR_RETURN(G.norm, UploadFloats(c, g.norm, cfg_.ssm_state));
    } else {
      const AttnWeights& a = L.attn;
      REWIND_ASSIGN_OR_RETURN(G.q, UploadWeight(c, a.q, at + "attn_q"));
      REWIND_ASSIGN_OR_RETURN(G.k, UploadWeight(c, a.k, at + "attn_k"));
      REWIND_ASSIGN_OR_RETURN(G.v, UploadWeight(c, a.v, at + "attn_v"));
      REWIND_ASSIGN_OR_RETURN(G.attn_out, UploadWeight(c, a.out, at + "attn_output"));
      REWIND_ASSIGN_OR_RETURN(G.q_norm, UploadFloats(c, a.q_norm, cfg_.head_dim));
      REWIND_ASSIGN_OR_RETURN(G.k_norm, UploadFloats(c, a.k_norm, cfg_.head_dim));
    }
    REWIND_RETURN_IF_ERROR(UploadFfn(il, G));
  }
  REWIND_ASSIGN_OR_RETURN(output_, UploadWeight(c, w_.output, "output"));
  REWIND_ASSIGN_OR_RETURN(output_norm_, UploadFloats(c, w_.output_norm, cfg_.n_embd));
  weights_bytes_ = c.allocated_bytes() - before;
  REWIND_RETURN_IF_ERROR(c.ReleaseStaging());  // the weights' staging (discrete GPUs: up to 64 MiB of host memory)
  log_.resize(cfg_.n_recurrent_layers());
  replay_pool_ = std::make_shared<ReplayPool>(ctx_);
  return Status::Ok();
}

Status VulkanBackend::Elt(Buffer& a, const Buffer& b, uint32_t rows, uint32_t width, uint32_t a_stride,
                          uint32_t b_off, uint32_t b_stride, uint32_t mode) {
  return gpu::RecordEltwise(*ctx_, a, b, mode, rows, width, 0, a_stride, b_off, b_stride);
}

Status VulkanBackend::CopyRows(const Buffer& src, uint32_t src_off, uint32_t src_stride, Buffer& dst,
                                uint32_t dst_off, uint32_t dst_stride, uint32_t rows, uint32_t width) {
  REWIND_ASSIGN_OR_RETURN(gpu::Pipeline * p, ctx_->GetPipeline("copy_rows"));
  struct { uint32_t rows, width, src_off, src_stride, dst_off, dst_stride; } pc{rows, width, src_off, src_stride,
                                                                                dst_off, dst_stride};
  ctx_->Dispatch(*p, {{&src}, {&dst}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(rows) * width));
  return Status::Ok();
}

// Conv window, SiLU, L2 norms, gates and the delta rule of GDN layer gi for the rows of the sequences in `tab`
// ({row0, n, state index, -}; max_n the largest n), from qkv_ [rows][C], b_ and a_ [rows][Hv] (the replay log's inputs): the one
// code path that changes a GDN state on the device, for forwards and for replays alike. o_ receives the core
// output.
Status VulkanBackend::GdnStateUpdate(const GpuLayer& L, int32_t gi, int32_t rows, int32_t n_seqs, uint32_t max_n,
                                     const Buffer& tab) {
  const uint32_t S = cfg_.ssm_state, Hk = cfg_.ssm_group, Hv = cfg_.ssm_heads, Kd = cfg_.ssm_key_dim(),
                 C = cfg_.ssm_conv_dim(), Kc = cfg_.ssm_conv_kernel;
  const uint32_t N = static_cast<uint32_t>(rows);
  Context& c = *ctx_;
  gpu::RecordGdnConv(c, qkv_.buf, L.conv, st_->conv(gi), u_.buf, tab, static_cast<uint32_t>(n_seqs), max_n, C, Kc, C);
  REWIND_ASSIGN_OR_RETURN(gpu::Pipeline * l2, c.GetPipeline("l2_norm"));
  // The Hk q heads and the Hk k heads sit side by side at the start of each row (Kd = ssm_key_dim() = Hk·S):
  // one dispatch normalises all 2·Hk of them, each as its own vector.
  struct { uint32_t rows, n, per, outer, inner, x_off; float eps; } lpc{N * 2 * Hk, S, 2 * Hk, C, S, 0, cfg_.eps};
  c.Dispatch(*l2, {{&u_.buf}}, &lpc, sizeof(lpc), Groups(lpc.rows));
  REWIND_ASSIGN_OR_RETURN(gpu::Pipeline * gates, c.GetPipeline("gdn_gates"));
  struct { uint32_t n, Hv; } gpc{N * Hv, Hv};
  c.Dispatch(*gates, {{&b_.buf}, {&a_.buf}, {&L.dt_bias}, {&L.ssm_a}}, &gpc, sizeof(gpc), Groups(gpc.n));
  const bool grouped = cfg_.arch == Arch::kQwen3Next;
  const gpu::GdnDeltaShape sh{Hv, S, C, Kd, grouped ? Hv / Hk : 1u, grouped ? 0xFFFFFFFFu : Hk};
  gpu::RecordGdnDelta(c, u_.buf, b_.buf, a_.buf, st_->delta(gi), o_.buf, tab, static_cast<uint32_t>(n_seqs), max_n, sh);
  return Status::Ok();
}

Status VulkanBackend::GdnLayer(const GpuLayer& L, int32_t gi, int32_t N, int32_t n_seqs, uint32_t max_n, bool record) {
  const uint32_t S = cfg_.ssm_state, Hv = cfg_.ssm_heads, C = cfg_.ssm_conv_dim(), rw = C + 2 * Hv;
  if (L.in.valid() || L.ba.valid()) REWIND_RETURN_IF_ERROR(SplitFused(L, N));
  if (!L.in.valid()) {
    REWIND_RETURN_IF_ERROR(Mat(L.qkv, t_.buf, N, qkv_.buf, true));  // t_ as the norm (or ssm_ba) left it
    REWIND_RETURN_IF_ERROR(Mat(L.gate, t_.buf, N, z_.buf, true));
  }
  if (!L.ba.valid()) {  // t_ is the layer's normed input throughout (SplitFused writes fused_)
    REWIND_RETURN_IF_ERROR(Mat(L.beta, t_.buf, N, b_.buf, true));
    REWIND_RETURN_IF_ERROR(Mat(L.alpha, t_.buf, N, a_.buf, true));
  }
  if (record) {  // the replay log's rows [C raw qkv | b | a], before the gates overwrite b and a
    REWIND_RETURN_IF_ERROR(CopyRows(qkv_.buf, 0, C, log_[gi].buf, 0, rw, N, C));
    REWIND_RETURN_IF_ERROR(CopyRows(b_.buf, 0, Hv, log_[gi].buf, C, rw, N, Hv));
    REWIND_RETURN_IF_ERROR(CopyRows(a_.buf, 0, Hv, log_[gi].buf, C + Hv, rw, N, Hv));
  }
  REWIND_RETURN_IF_ERROR(GdnStateUpdate(L, gi, N, n_seqs, max_n, seq_tab_.buf));
  // Gated RMSNorm per head, output projection.
  REWIND_RETURN_IF_ERROR(gpu::RecordRmsNormForMatMul(*ctx_, o_.buf, N * Hv, S, L.norm, cfg_.eps, o_.buf, nullptr,
                                                     L.gdn_out.type, act_, &z_.buf, N));
  return gpu::RecordMatMul(*ctx_, L.gdn_out, o_.buf, 0, N, y_.buf, 0, cfg_.n_embd, act_, {true, false});
}

// Re-applies logged rows to the device states: run r takes rows [0, rows) of its log onto state index `state`.
// Same kernels as the forward (GdnStateUpdate): the same bits as the forward that logged them.
Status VulkanBackend::ReplayPass(std::span<const ReplayRun> runs) {
  const uint32_t Hv = cfg_.ssm_heads, C = cfg_.ssm_conv_dim(), rw = C + 2 * Hv;
  const int32_t n_rec = cfg_.n_recurrent_layers();
  int32_t R = 0, max_n = 0;
  std::vector<int32_t> tab;
  for (const ReplayRun& r : runs) {
    tab.insert(tab.end(), {R, r.rows, r.state, 0});
    R += r.rows;
    max_n = std::max(max_n, r.rows);
  }
  if (R == 0) return Status::Ok();
  Context& c = *ctx_;
  REWIND_RETURN_IF_ERROR(EnsureRows(R));
  REWIND_RETURN_IF_ERROR(replay_tab_.Ensure(c, 4 * tab.size()));
  REWIND_RETURN_IF_ERROR(replay_in_.Ensure(c, 4 * static_cast<size_t>(R) * rw * n_rec));
  // Rows of every layer from each log into [layer][R][rw]: a device copy per layer from a log this backend
  // recorded (its per-layer buffers); a log handed in as host rows ([token][layer][rw]) is uploaded, counted.
  std::vector<const DeviceReplayRows*> dev(runs.size());
  bool host = false;
  for (size_t i = 0; i < runs.size(); ++i) {
    REWIND_ASSIGN_OR_RETURN(dev[i], DeviceRows(*runs[i].log));
    host = host || dev[i] == nullptr;
  }
  if (host) {
    std::vector<float> rows(static_cast<size_t>(R) * rw * n_rec);
    for (int32_t gi = 0; gi < n_rec; ++gi) {
      size_t at = static_cast<size_t>(gi) * R;
      for (size_t i = 0; i < runs.size(); at += runs[i].rows, ++i)
        for (int32_t t = 0; t < runs[i].rows && dev[i] == nullptr; ++t)
          std::memcpy(rows.data() + (at + t) * rw, runs[i].log->rows.data() + (static_cast<size_t>(t) * n_rec + gi) * rw,
                      4 * rw);
    }
    REWIND_RETURN_IF_ERROR(c.Upload(replay_in_.buf, rows.data(), 4 * rows.size()));
    replay_pool_->to_device += 4 * rows.size();
  }
  REWIND_RETURN_IF_ERROR(c.Upload(replay_tab_.buf, tab.data(), 4 * tab.size()));
  for (int32_t gi = 0; gi < n_rec; ++gi) {
    size_t at = static_cast<size_t>(gi) * R;
    for (size_t i = 0; i < runs.size(); at += runs[i].rows, ++i)
      if (dev[i] != nullptr) c.Copy(dev[i]->layer(gi), 0, replay_in_.buf, 4 * at * rw, 4 * static_cast<size_t>(runs[i].rows) * rw);
  }
  for (int32_t il = 0; il < cfg_.n_layer; ++il) {
    if (cfg_.kinds[il] != LayerKind::kGdn) continue;
    const int32_t gi = cfg_.kind_index[il];
    const uint32_t base = static_cast<uint32_t>(gi) * R * rw;
    REWIND_RETURN_IF_ERROR(CopyRows(replay_in_.buf, base, rw, qkv_.buf, 0, C, R, C));
    REWIND_RETURN_IF_ERROR(CopyRows(replay_in_.buf, base + C, rw, b_.buf, 0, Hv, R, Hv));
    REWIND_RETURN_IF_ERROR(CopyRows(replay_in_.buf, base + C + Hv, rw, a_.buf, 0, Hv, R, Hv));
    REWIND_RETURN_IF_ERROR(GdnStateUpdate(layers_[il], gi, R, static_cast<int32_t>(runs.size()),
                                          static_cast<uint32_t>(max_n), replay_tab_.buf));
  }
  return c.Submit();
}

Status VulkanBackend::AttnLayer(const GpuLayer& L, int32_t ai, int32_t N, uint32_t max_pos) {
  const uint32_t D = cfg_.head_dim, Hq = cfg_.n_head, Hkv = cfg_.n_head_kv, QW = Hq * D, KW = Hkv * D;
  Context& c = *ctx_;
  REWIND_RETURN_IF_ERROR(Mat(L.q, t_.buf, N, qg_.buf, true));  // t_ as the norm converted it
  REWIND_RETURN_IF_ERROR(Mat(L.k, t_.buf, N, k_.buf, true));
  REWIND_RETURN_IF_ERROR(Mat(L.v, t_.buf, N, v_.buf, true));
  // q: normed out of [q | gate] pairs; k normed in place; both rotated.
  REWIND_RETURN_IF_ERROR(gpu::RecordRmsNorm(c, qg_.buf, 0, 2 * D, N * Hq, D, &L.q_norm, cfg_.eps, q_.buf, 0, D));
  REWIND_RETURN_IF_ERROR(gpu::RecordRmsNorm(c, k_.buf, 0, D, N * Hkv, D, &L.k_norm, cfg_.eps, k_.buf, 0, D));
  // Hadamard rotation of quantised caches, as the CPU does it (model/attention_layer.cc): Q and K heads when K is
  // a block type, V heads (and back on the output) when V is.
  const int32_t rot_k = kernels::KvRotationSize(kv_types_.k, static_cast<int32_t>(D), true);
  const int32_t rot_v = kernels::KvRotationSize(kv_types_.v, static_cast<int32_t>(D), false);
  REWIND_ASSIGN_OR_RETURN(gpu::Pipeline * rope, c.GetPipeline("rope"));
  struct { uint32_t total, heads, row_stride, head_stride, x_off, n_rot; } rq{N * Hq, Hq, QW, D, 0,
                                                                             static_cast<uint32_t>(cfg_.n_rot)};
  c.Dispatch(*rope, {{&q_.buf}, {&rope_.buf}}, &rq, sizeof(rq), Groups(rq.total));
  struct { uint32_t total, heads, row_stride, head_stride, x_off, n_rot; } rk{N * Hkv, Hkv, KW, D, 0,
                                                                             static_cast<uint32_t>(cfg_.n_rot)};
  c.Dispatch(*rope, {{&k_.buf}, {&rope_.buf}}, &rk, sizeof(rk), Groups(rk.total));
  if (rot_k > 0) {
    REWIND_RETURN_IF_ERROR(gpu::RecordHadamard(c, q_.buf, static_cast<uint64_t>(N) * QW, static_cast<uint32_t>(rot_k)));
    REWIND_RETURN_IF_ERROR(gpu::RecordHadamard(c, k_.buf, static_cast<uint64_t>(N) * KW, static_cast<uint32_t>(rot_k)));
  }
  if (rot_v > 0)
    REWIND_RETURN_IF_ERROR(gpu::RecordHadamard(c, v_.buf, static_cast<uint64_t>(N) * KW, static_cast<uint32_t>(rot_v)));
  // The new rows into the pages in the cache types (the CPU's bytes); attention then reads every key and value
  // straight from the pages through the batch's page lists (no gather copy), dequantising in the kernel.
  const gguf::TensorType kt = kernels::KvTensorType(kv_types_.k), vt = kernels::KvTensorType(kv_types_.v);
  REWIND_RETURN_IF_ERROR(gpu::RecordKvScatter(c, k_.buf, kvd_->k(ai), scatter_tab_.buf, n_scatter_, KW, kt));
  REWIND_RETURN_IF_ERROR(gpu::RecordKvScatter(c, v_.buf, kvd_->v(ai), scatter_tab_.buf, n_scatter_, KW, vt));
  const float scale = cfg_.attn_scale != 0.0f ? cfg_.attn_scale : 1.0f / std::sqrt(static_cast<float>(D));
  const gpu::AttentionShape ash{static_cast<uint32_t>(N), Hq, Hkv, D, scale, page_rows_, kt, vt, attn_kernel_,
                                attn_split_};
  REWIND_RETURN_IF_ERROR(gpu::RecordAttention(c, q_.buf, kvd_->k(ai), kvd_->v(ai), att_.buf, row_tab_.buf,
                                              page_tab_.buf, max_pos, ash, attn_ml_.buf));
  if (rot_v > 0)  // back from the rotated V space, before the output gate
    REWIND_RETURN_IF_ERROR(gpu::RecordHadamard(c, att_.buf, static_cast<uint64_t>(N) * QW, static_cast<uint32_t>(rot_v)));
  REWIND_RETURN_IF_ERROR(Elt(att_.buf, qg_.buf, N * Hq, D, D, D, 2 * D, 3));  // output gate
  return gpu::RecordMatMul(c, L.attn_out, att_.buf, 0, N, y_.buf, 0, cfg_.n_embd, act_);
}

// The per-forward buffers of an n-row forward and their bytes: f(member, bytes) for each (EnsureRows grows them,
// forward_bytes counts them). The replay rows (log_) and the output rows are apart.
template <typename F>
void VulkanBackend::ForEachRowBuffer(size_t n, F&& f) const {
  const ModelConfig& cf = cfg_;
  const size_t E = cf.n_embd, C = cf.ssm_conv_dim(), Hv = cf.ssm_heads, Vd = cf.ssm_inner,
               QW = static_cast<size_t>(cf.n_head) * cf.head_dim, KW = static_cast<size_t>(cf.n_head_kv) * cf.head_dim,
               F_ = cf.n_ff;
  using B = VulkanBackend;
  for (Grown B::*g : {&B::x_, &B::t_, &B::y_}) f(g, 4 * n * E);
  for (Grown B::*g : {&B::qkv_, &B::u_}) f(g, 4 * n * C);
  for (Grown B::*g : {&B::z_, &B::o_}) f(g, 4 * n * Vd);
  for (Grown B::*g : {&B::b_, &B::a_}) f(g, 4 * n * Hv);
  for (Grown B::*g : {&B::q_, &B::att_}) f(g, 4 * n * QW);
  for (Grown B::*g : {&B::k_, &B::v_}) f(g, 4 * n * KW);
  size_t ff = F_;
  if (cf.is_moe()) ff = std::max<size_t>(ff, cf.n_ff_shexp);
  for (Grown B::*g : {&B::fg_, &B::fu_}) f(g, 4 * n * ff);
  f(&B::qg_, 4 * n * 2 * QW);
  if (cf.arch == Arch::kQwen3Next)  // the fused ssm_in (2Kd + 2Vd) or ssm_ba (2Hv) rows before their split
    f(&B::fused_, 4 * n * std::max<size_t>(2 * cf.ssm_key_dim() + 2 * Vd, 2 * Hv));
  if (cf.is_moe()) {
    const size_t X = cf.n_expert, K = cf.n_expert_used, Fe = cf.n_ff_exp;
    f(&B::moe_logits_, 4 * n * X);
    for (Grown B::*g : {&B::moe_sel_, &B::moe_wt_, &B::sh_g_}) f(g, 4 * n * K);
    for (Grown B::*g : {&B::moe_h_, &B::moe_u_}) f(g, 4 * n * K * Fe);
    f(&B::moe_y_, 4 * n * K * E);
    f(&B::sh_y_, 4 * n * E);
  }
  f(&B::rope_, 4 * n * std::max(cf.n_rot, 2));
}

Status VulkanBackend::EnsureRows(int32_t rows) {
  Context& c = *ctx_;
  const size_t n = static_cast<size_t>(rows);
  Status st = Status::Ok();
  ForEachRowBuffer(n, [&](Grown VulkanBackend::*g, size_t bytes) {
    if (st.ok()) st = (this->*g).Ensure(c, bytes);
  });
  REWIND_RETURN_IF_ERROR(st);
  for (Grown& g : log_) REWIND_RETURN_IF_ERROR(g.Ensure(c, 4 * n * cfg_.replay_row_floats()));
  return Status::Ok();
}

uint64_t VulkanBackend::forward_bytes(int32_t rows, int32_t out_rows) const {
  const size_t n = static_cast<size_t>(std::max(rows, 1)), n_out = static_cast<size_t>(std::max(out_rows, 1));
  uint64_t b = 0;
  ForEachRowBuffer(n, [&](Grown VulkanBackend::*, size_t bytes) { b += bytes; });
  // The largest activation rows a matmul quantises (ActScratch: at most 4 bytes a value with its scales).
  const size_t widest = std::max({static_cast<size_t>(cfg_.n_embd), static_cast<size_t>(cfg_.n_ff),
                                  static_cast<size_t>(cfg_.ssm_inner),
                                  static_cast<size_t>(cfg_.n_head) * cfg_.head_dim,
                                  static_cast<size_t>(cfg_.n_ff_exp) * std::max(cfg_.n_expert_used, 1)});
  b += 4 * n * widest;
  if (cfg_.is_moe()) b += gpu::MoeOrderBytes(static_cast<int64_t>(n) * cfg_.n_expert_used, cfg_.n_expert);  // ActScratch
  // The output rows: their normed rows and logits (hn_, logits_), tables; the attention's scratch.
  b += 4 * n_out * (static_cast<size_t>(cfg_.n_embd) + cfg_.n_vocab) + 64 * n;
  b += gpu::AttentionScratchBytes(static_cast<uint32_t>(n), static_cast<uint32_t>(cfg_.n_head),
                                  static_cast<uint32_t>(cfg_.head_dim));
  // Replay logs: the forward's rows (log_), the logs it records for the sequences, a rollback's input rows
  // (replay_in_), and the pool's spare sets (ReplayPool::Give: at most the largest log).
  b += 4 * n * cfg_.ReplayBytesPerToken();
  return b;
}

Status VulkanBackend::AttachStates(StateStorage& states) {
  if (states.device() == nullptr) {
    REWIND_ASSIGN_OR_RETURN(std::shared_ptr<DeviceStates> d, DeviceStates::Create(ctx_, states));
    states.SetDevice(std::move(d));
  }
  st_ = dynamic_cast<DeviceStates*>(states.device());
  if (st_ == nullptr || st_->context() != ctx_.get())
    return Error::InvalidArgument("this state storage lives on another device than " + name());
  return Status::Ok();
}

Status VulkanBackend::AttachKv(KvStorage& kv) {
  if (kv.device() == nullptr) {
    const KvTypes t = kv.config().type;
    for (KvType e : {t.k, t.v})
      if (kernels::KvBlockElems(e) == 1 && e != KvType::kF32 && kv.config().row_width % 2 != 0)
        return Error::Unsupported("the GPU backend needs an even KV row width for an " +
                                  std::string(kernels::KvTypeName(e)) + " cache");
    REWIND_ASSIGN_OR_RETURN(std::shared_ptr<DeviceKv> d, DeviceKv::Create(ctx_, kv));
    kv.SetDevice(std::move(d));
  }
  kvd_ = dynamic_cast<DeviceKv*>(kv.device());
  if (kvd_ == nullptr || kvd_->context() != ctx_.get())
    return Error::InvalidArgument("this KV storage lives on another device than " + name());
  return Status::Ok();
}

Status VulkanBackend::ReplayState(int32_t slot_in, int32_t slot_out, const ReplaySeqLog& log, int32_t k,
                                  StateStorage& states) {
  REWIND_RETURN_IF_ERROR(AttachStates(states));
  REWIND_RETURN_IF_ERROR(EnsureRows(std::max(k, 1)));
  REWIND_RETURN_IF_ERROR(slot_in < 0 ? st_->Clear(slot_out) : st_->Copy(slot_in, slot_out));
  const ReplayRun run[] = {{&log, k, slot_out}};
  return ReplayPass(run);  // on the device slot itself: no host round trip
}

Expected<const DeviceReplayRows*> VulkanBackend::DeviceRows(const ReplaySeqLog& log) const {
  if (log.device == nullptr) return static_cast<const DeviceReplayRows*>(nullptr);
  const auto* d = dynamic_cast<const DeviceReplayRows*>(log.device.get());
  if (d == nullptr || d->pool() != replay_pool_.get())
    return Error::InvalidArgument("this replay log was recorded on another device than " + name());
  return d;
}

Expected<std::unique_ptr<DeviceReplayRows>> VulkanBackend::NewLog(size_t layer_bytes) {
  REWIND_ASSIGN_OR_RETURN(std::vector<Buffer> set, replay_pool_->Take(cfg_.n_recurrent_layers(), layer_bytes));
  return std::make_unique<DeviceReplayRows>(replay_pool_, std::move(set));
}

// Appends on the device: in place when dst's buffer holds both, else into a buffer twice the size (a drafter
// appends a token per draft step).
Status VulkanBackend::AppendReplay(ReplaySeqLog& dst, const ReplaySeqLog& tail) {
  const size_t rw = cfg_.replay_row_floats(), n_rec = cfg_.n_recurrent_layers();
  const size_t have = 4 * rw * dst.n_tokens, add = 4 * rw * tail.n_tokens;
  REWIND_ASSIGN_OR_RETURN(const DeviceReplayRows* t, DeviceRows(tail));
  REWIND_ASSIGN_OR_RETURN(const DeviceReplayRows* d0, DeviceRows(dst));
  if (dst.n_tokens > 0 && d0 == nullptr) return Error::InvalidArgument("replay append: host rows on a device backend");
  if (tail.n_tokens == 0) return Status::Ok();
  Context& c = *ctx_;
  if (d0 == nullptr || d0->capacity_floats() * 4 < n_rec * (have + add)) {
    REWIND_ASSIGN_OR_RETURN(std::unique_ptr<DeviceReplayRows> grown, NewLog(2 * (have + add)));
    for (size_t gi = 0; gi < n_rec && have > 0; ++gi)
      c.Copy(d0->layer(static_cast<int32_t>(gi)), 0, grown->layer(static_cast<int32_t>(gi)), 0, have);
    dst.device = std::move(grown);  // the old buffers go back to the pool after the copies (ReplayPool::Give)
  }
  auto* d = static_cast<DeviceReplayRows*>(dst.device.get());
  std::vector<float> up(t == nullptr ? add / 4 : 0);
  for (size_t gi = 0; gi < n_rec; ++gi) {
    Buffer& to = d->layer(static_cast<int32_t>(gi));
    if (t != nullptr) {
      c.Copy(t->layer(static_cast<int32_t>(gi)), 0, to, have, add);
      continue;
    }
    for (int32_t k = 0; k < tail.n_tokens; ++k)
      std::memcpy(up.data() + k * rw, tail.rows.data() + (k * n_rec + gi) * rw, 4 * rw);
    REWIND_RETURN_IF_ERROR(c.Upload(to, up.data(), add, have));
    replay_pool_->to_device += add;
  }
  dst.n_tokens += tail.n_tokens;
  dst.rows.clear();
  return c.Submit();
}

Status VulkanBackend::Forward(std::span<const BatchSeq> batch, std::span<const internal::SeqRun> seqs, int32_t N,
                              KvStorage& kv, StateStorage& states, ForwardOutput* out, ReplayLog* replay,
                              int32_t top_k) {
  const ModelConfig& cf = cfg_;
  const int32_t E = cf.n_embd, V = cf.n_vocab, n_seqs = static_cast<int32_t>(seqs.size());
  const KvTypes kt = kv.config().type;
  if (cf.n_attn_layers() > 0) {
    for (KvType t : {kt.k, kt.v})
      if (auto code = gpu::KvFormatCode(kernels::KvTensorType(t)); !code.ok()) return code.error();
    kv_types_ = kt;
  }
  Context& c = *ctx_;
  const uint32_t C = cf.ssm_conv_dim(), Hv = cf.ssm_heads;
  const size_t n = static_cast<size_t>(N);
  int32_t max_prefix = 0;
  for (const internal::SeqRun& s : seqs) max_prefix = std::max(max_prefix, s.prefix != nullptr ? s.prefix_rows : 0);
  REWIND_RETURN_IF_ERROR(EnsureRows(std::max(N, max_prefix * n_seqs)));
  REWIND_RETURN_IF_ERROR(AttachStates(states));

  // ---- Host-side inputs: embeddings, the sequence and row tables, the RoPE table.
  // An image's rows are its encoder's embeddings (as model.cc): their placeholder ids are no vocabulary entries.
  std::vector<float> host(n * E);
  for (size_t s = 0; s < batch.size(); ++s)
    for (int32_t j = 0; j < seqs[s].n; ++j) {
      float* row = host.data() + static_cast<size_t>(seqs[s].row0 + j) * E;
      const ImageSpan* img = batch[s].images ? batch[s].images->Find(batch[s].pos0 + j) : nullptr;
      if (img != nullptr) {
        std::memcpy(row, img->rows + static_cast<int64_t>(batch[s].pos0 + j - img->start) * E, E * sizeof(float));
      } else {
        kernels::DequantizeRowTo(w_.token_embd, batch[s].tokens[j], row);
      }
    }
  if (cf.embedding_scale != 0.0f)
    for (float& v : host) v = v * cf.embedding_scale;
  REWIND_RETURN_IF_ERROR(c.Upload(x_.buf, host.data(), 4 * host.size()));
  std::vector<int32_t> seq_tab(4 * n_seqs), row_tab(2 * n);
  uint32_t max_n = 0, max_pos = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    max_n = std::max(max_n, static_cast<uint32_t>(seqs[s].n));
    max_pos = std::max(max_pos, static_cast<uint32_t>(seqs[s].pos0 + seqs[s].n - 1));
    seq_tab[4 * s] = seqs[s].row0;
    seq_tab[4 * s + 1] = seqs[s].n;
    seq_tab[4 * s + 2] = seqs[s].slot;  // the device slot the sequence's states are read and written in
    for (int32_t j = 0; j < seqs[s].n; ++j) {
      row_tab[2 * (seqs[s].row0 + j) + 1] = seqs[s].pos0 + j;
    }
  }
  REWIND_RETURN_IF_ERROR(seq_tab_.Ensure(c, 4 * seq_tab.size()));
  REWIND_RETURN_IF_ERROR(c.Upload(seq_tab_.buf, seq_tab.data(), 4 * seq_tab.size()));
  if (cf.n_attn_layers() > 0 && cf.n_rot > 0) {
    const kernels::RopeParams rp = internal::MakeRope(cf);
    std::vector<float> table(n * cf.n_rot);
    for (int32_t s = 0; s < n_seqs; ++s)  // an image's rows rotate by their (t, y, x) positions (IMRoPE)
      for (int32_t j = 0; j < seqs[s].n; ++j) {
        const int32_t i = seqs[s].row0 + j, pos = seqs[s].pos0 + j;
        float* row = table.data() + static_cast<size_t>(i) * cf.n_rot;
        if (seqs[s].images != nullptr && !seqs[s].images->empty()) {
          kernels::RopeCacheMulti(rp, seqs[s].images->RopePos(pos), row);
        } else {
          kernels::RopeCache(rp, pos, row);
        }
      }
    REWIND_RETURN_IF_ERROR(c.Upload(rope_.buf, table.data(), 4 * table.size()));
  }

  // ---- The batch's recurrent states are the device slots themselves: a sequence that starts from another
  // slot (slot_in, never another sequence's output: Model::Forward checks) gets a device copy first; then a lazy
  // rollback's logged rows (BatchSeq::prefix) re-applied by the forward's own kernels before the tokens.
  std::vector<ReplayRun> prefix_runs;
  for (int32_t s = 0; s < n_seqs; ++s) {
    if (seqs[s].slot_in >= 0) REWIND_RETURN_IF_ERROR(st_->Copy(seqs[s].slot_in, seqs[s].slot));
    if (seqs[s].prefix != nullptr && seqs[s].prefix_rows > 0)
      prefix_runs.push_back({seqs[s].prefix, seqs[s].prefix_rows, seqs[s].slot});
  }
  REWIND_RETURN_IF_ERROR(ReplayPass(prefix_runs));
  // ---- The KV pages are on the device: the rows to store (new) and each sequence's page list, read by
  // attention through row_tab's offsets.
  const int32_t ps = kv.page_size();
  if (cf.n_attn_layers() > 0) {
    REWIND_RETURN_IF_ERROR(AttachKv(kv));
    std::vector<int32_t> scatter, pages;
    for (int32_t s = 0; s < n_seqs; ++s) {
      const int32_t off = static_cast<int32_t>(pages.size()), n_pages = seqs[s].n > 0 ? (seqs[s].pos0 + seqs[s].n - 1) / ps + 1 : 0;
      pages.insert(pages.end(), seqs[s].pages.begin(), seqs[s].pages.begin() + n_pages);
      for (int32_t j = 0; j < seqs[s].n; ++j) {
        const int32_t p = seqs[s].pos0 + j;
        scatter.insert(scatter.end(), {seqs[s].row0 + j, seqs[s].pages[p / ps] * ps + p % ps});
        row_tab[2 * (seqs[s].row0 + j)] = off;
      }
    }
    n_scatter_ = static_cast<uint32_t>(scatter.size() / 2);
    page_rows_ = static_cast<uint32_t>(ps);
    REWIND_RETURN_IF_ERROR(scatter_tab_.Ensure(c, 4 * scatter.size()));
    REWIND_RETURN_IF_ERROR(c.Upload(scatter_tab_.buf, scatter.data(), 4 * scatter.size()));
    REWIND_RETURN_IF_ERROR(page_tab_.Ensure(c, 4 * pages.size()));
    REWIND_RETURN_IF_ERROR(c.Upload(page_tab_.buf, pages.data(), 4 * pages.size()));
  }
  REWIND_RETURN_IF_ERROR(row_tab_.Ensure(c, 4 * row_tab.size()));
  REWIND_RETURN_IF_ERROR(c.Upload(row_tab_.buf, row_tab.data(), 4 * row_tab.size()));

  // ---- Layers.
  // Each residual add runs in the dispatch of the norm that follows it (Norm's `add`): the last layer's in the
  // output norm's (a forward without output rows does not need it).
  for (int32_t il = 0; il < cf.n_layer; ++il) {
    const GpuLayer& L = layers_[il];
    if (il == 0) REWIND_RETURN_IF_ERROR(Norm(x_.buf, N, E, L.attn_norm, t_.buf, nullptr, FirstMixerMatrix(L)));
    if (cf.kinds[il] == LayerKind::kGdn) {
      REWIND_RETURN_IF_ERROR(GdnLayer(L, cf.kind_index[il], N, n_seqs, max_n, replay != nullptr));
    } else {
      REWIND_RETURN_IF_ERROR(AttnLayer(L, cf.kind_index[il], N, max_pos));
    }
    REWIND_RETURN_IF_ERROR(Norm(x_.buf, N, E, L.post_norm, t_.buf, &y_.buf, FirstFfnMatrix(L)));
    REWIND_RETURN_IF_ERROR(FfnBlock(L, N));
    if (il + 1 < cf.n_layer)
      REWIND_RETURN_IF_ERROR(
          Norm(x_.buf, N, E, layers_[il + 1].attn_norm, t_.buf, &y_.buf, FirstMixerMatrix(layers_[il + 1])));
  }

  // ---- Output rows (as model.cc): the last token of each sequence, or all of them; final norm, LM head.
  out->hidden.clear();
  out->hidden_all.clear();
  const std::vector<int32_t> src_rows = internal::SelectOutputRows(cf, batch, seqs, out);
  const int32_t n_out = static_cast<int32_t>(src_rows.size());
  // Top-k on the device when asked (the host applies logit_scale after the download, so a scaled model
  // returns full rows and the caller selects: scaling can make distinct logits equal). On a device that runs its
  // shaders on the host's cores (lavapipe) the selection pass costs more than the download it saves (0.8B,
  // 151,936 vocab: +350 ms on a 1.4 s step): full rows, and Model::Forward selects on the host.
  const bool device_top = top_k > 0 && cf.logit_scale == 0.0f && !c.runs_on_cpu();
  out->top_k = 0;
  out->top.clear();
  out->logits.resize(device_top ? 0 : static_cast<size_t>(n_out) * V);
  const Buffer* top_res = nullptr;
  if (n_out > 0) {
    REWIND_RETURN_IF_ERROR(hn_.Ensure(c, 4 * static_cast<size_t>(n_out) * E));
    REWIND_RETURN_IF_ERROR(logits_.Ensure(c, 4 * static_cast<size_t>(n_out) * V));
    REWIND_RETURN_IF_ERROR(Norm(x_.buf, N, E, output_norm_, t_.buf, cf.n_layer > 0 ? &y_.buf : nullptr, output_));
    // The output rows gathered, unless they are the first n_out rows in order (a decode step's one row).
    bool in_place = true;
    for (int32_t r = 0; r < n_out; ++r) in_place = in_place && src_rows[r] == r;
    if (!in_place)
      for (int32_t r = 0; r < n_out; ++r)
        c.Copy(t_.buf, 4 * static_cast<size_t>(src_rows[r]) * E, hn_.buf, 4 * static_cast<size_t>(r) * E, 4 * E);
    REWIND_RETURN_IF_ERROR(Mat(output_, in_place ? t_.buf : hn_.buf, n_out, logits_.buf, in_place));
    if (device_top)
      REWIND_RETURN_IF_ERROR(gpu::RecordTopLogits(c, logits_.buf, static_cast<uint32_t>(n_out), static_cast<uint32_t>(V),
                                                  static_cast<uint32_t>(top_k), top_, &top_res));
  }
  // The download submits the recorded forward and its copy out together (one wait; on unified memory the
  // download submits, then copies from the mapped buffer).
  if (n_out == 0) REWIND_RETURN_IF_ERROR(c.Submit());
  if (device_top) {
    out->top_k = top_k;
    out->top.resize(static_cast<size_t>(n_out) * top_k);
    if (n_out > 0) REWIND_RETURN_IF_ERROR(c.Download(*top_res, out->top.data(), 8 * out->top.size()));
  } else if (n_out > 0) {
    REWIND_RETURN_IF_ERROR(c.Download(logits_.buf, out->logits.data(), 4 * out->logits.size()));
  }
  if (cf.logit_scale != 0.0f) {
    const float inv = 1.0f / cf.logit_scale;
    for (float& v : out->logits) v = v * inv;
  }

  // ---- The replay log stays on the device: each sequence's log is a set of per-layer device buffers, its
  // prefix rows (a lazy rollback's, copied from the prefix log) then its rows of log_; no byte goes through the
  // host.
  if (replay != nullptr) {
    const size_t rw = C + 2 * Hv, n_rec = cf.n_recurrent_layers();
    for (int32_t s = 0; s < n_seqs; ++s) {
      const int32_t P = seqs[s].prefix != nullptr ? seqs[s].prefix_rows : 0;
      REWIND_ASSIGN_OR_RETURN(std::unique_ptr<DeviceReplayRows> d, NewLog(4 * rw * (P + seqs[s].n)));
      const DeviceReplayRows* pre = nullptr;
      if (P > 0) {
        REWIND_ASSIGN_OR_RETURN(pre, DeviceRows(*seqs[s].prefix));
        if (pre == nullptr) {  // a prefix handed in as host rows
          std::vector<float> up(rw * P);
          for (size_t gi = 0; gi < n_rec; ++gi) {
            for (int32_t t = 0; t < P; ++t)
              std::memcpy(up.data() + t * rw, seqs[s].prefix->rows.data() + (t * n_rec + gi) * rw, 4 * rw);
            REWIND_RETURN_IF_ERROR(c.Upload(d->layer(static_cast<int32_t>(gi)), up.data(), 4 * up.size()));
            replay_pool_->to_device += 4 * up.size();
          }
        }
      }
      for (size_t gi = 0; gi < n_rec; ++gi) {
        Buffer& dst = d->layer(static_cast<int32_t>(gi));
        if (pre != nullptr) c.Copy(pre->layer(static_cast<int32_t>(gi)), 0, dst, 0, 4 * rw * P);
        c.Copy(log_[gi].buf, 4 * rw * seqs[s].row0, dst, 4 * rw * P, 4 * rw * seqs[s].n);
      }
      replay->seqs[s].device = std::move(d);
    }
    REWIND_RETURN_IF_ERROR(c.Submit());
  }
  return Status::Ok();
}

// What the GPU forward runs: qwen35 dense layers only (GDN, gated attention with q/k norms and NEOX RoPE, SwiGLU).
Status CheckSupported(const ModelConfig& cfg, const Weights& w) {
  if (cfg.arch != Arch::kQwen35 && cfg.arch != Arch::kQwen35Moe && cfg.arch != Arch::kQwen3Next)
    return Error::Unsupported(std::string("the GPU backend does not support the ") + ArchName(cfg.arch) +
                              " architecture yet (qwen35, qwen35moe and qwen3next only; use --device cpu)");
  for (int32_t il = 0; il < cfg.n_layer; ++il) {
    const LayerKind k = cfg.kinds[il];
    if (k != LayerKind::kGdn && k != LayerKind::kAttention)
      return Error::Unsupported("the GPU backend does not support layer " + std::to_string(il) + "'s kind yet");
    if (w.layers[il].post_norm == nullptr) return Error::Unsupported("the GPU backend needs an FFN in every block");
    if (k == LayerKind::kAttention &&
        (!cfg.attn_gated || cfg.rope_adjacent || w.layers[il].attn.q_norm == nullptr || w.layers[il].attn.k_norm == nullptr))
      return Error::Unsupported("the GPU backend supports gated attention with q/k norms and NEOX RoPE only");
  }
  if (cfg.residual_scale != 0.0f) return Error::Unsupported("the GPU backend does not support residual scaling yet");
  return Status::Ok();
}

}  // namespace vk

Expected<std::unique_ptr<ForwardBackend>> MakeVulkanBackend(const ModelConfig& cfg, const Weights& w,
                                                            int32_t device, int32_t n_gpu_layers) {
  if (n_gpu_layers >= 0 && n_gpu_layers < cfg.n_layer && n_gpu_layers != 0)
    return Error::Unsupported("partial offload is not supported yet: -ngl " + std::to_string(n_gpu_layers) +
                              " of " + std::to_string(cfg.n_layer) + " layers (use 0 for the CPU or >= " +
                              std::to_string(cfg.n_layer) + " for the whole model on the GPU)");
  REWIND_RETURN_IF_ERROR(vk::CheckSupported(cfg, w));
  REWIND_ASSIGN_OR_RETURN(std::shared_ptr<gpu::Context> ctx, gpu::OpenDevice(device));
  auto b = std::make_unique<vk::VulkanBackend>(std::move(ctx), cfg, w);
  // REWIND_GPU_ATTENTION=serial|parallel|group forces an attention kernel (the same bits; for measurements).
  if (const char* e = std::getenv("REWIND_GPU_ATTENTION"); e != nullptr && e[0] != '\0') {
    REWIND_ASSIGN_OR_RETURN(gpu::AttentionKernel k, gpu::ParseAttentionKernel(e));
    b->set_attention_kernel(k);
  }
  // REWIND_GPU_ATTENTION_SPLIT=0|1|auto forces a decode row's key spans onto workgroups of their own or not.
  if (const char* e = std::getenv("REWIND_GPU_ATTENTION_SPLIT"); e != nullptr && e[0] != '\0') {
    REWIND_ASSIGN_OR_RETURN(gpu::AttentionSplit sp, gpu::ParseAttentionSplit(e));
    b->set_attention_split(sp);
  }
  REWIND_RETURN_IF_ERROR(b->Upload());
  return std::unique_ptr<ForwardBackend>(std::move(b));
}

}  // namespace rw::model
