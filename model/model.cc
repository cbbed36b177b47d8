// Model loading and the batch forward driver (spec model-qwen35.md 7.1).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "base/check.h"
#include "base/progress.h"
#include "gpu/device.h"
#include "kernels/alloc_tuning.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "model/forward.h"
#include "model/forward_backend.h"
#include "model/layers.h"

namespace rw::model {

using kernels::ParallelFor;

namespace {

// Reads one byte of every page of the tensor data, so the first request does not pay the page faults of a
// lazily mapped file; a model that takes more than a few seconds logs its progress (bytes mapped / total).
void PageIn(const gguf::File& file) {
  constexpr uint64_t kPage = 4096, kStep = 64ull << 20;
  uint64_t total = 0;
  for (const auto& t : file.tensors()) total += t.nbytes;
  Progress progress("loading " + file.path(), static_cast<double>(total), "bytes", 0, 2.0, 3.0);
  uint64_t done = 0, next = kStep;
  unsigned sum = 0;
  for (const auto& t : file.tensors()) {
    const volatile uint8_t* p = t.data;
    for (uint64_t off = 0; off < t.nbytes; off += kPage) sum += p[off];
    done += t.nbytes;
    if (done >= next) {
      progress.Update(static_cast<double>(done));
      next = done + kStep;
    }
  }
  progress.Finish(static_cast<double>(done));
  asm volatile("" : : "r"(sum));  // the reads above are kept
}

}  // namespace

Model::~Model() = default;

Expected<std::unique_ptr<Model>> Model::Load(const std::string& path, const LoadOptions& options) {
  std::unique_ptr<Model> m(new Model());
  REWIND_ASSIGN_OR_RETURN(m->file_, gguf::File::Open(path));
  REWIND_ASSIGN_OR_RETURN(m->cfg_, ModelConfig::FromGguf(*m->file_));
  REWIND_ASSIGN_OR_RETURN(m->w_, BindWeights(*m->file_, m->cfg_));
  PageIn(*m->file_);
  m->pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, options.n_threads));
  if (options.device >= 0) {
    REWIND_ASSIGN_OR_RETURN(m->backend_, MakeVulkanBackend(m->cfg_, m->w_, options.device, options.n_gpu_layers));
  }
  return m;
}

std::string Model::device_name() const { return backend_ ? backend_->name() : "cpu"; }
int32_t Model::device_index() const {
  if (!backend_) return -1;
  auto d = gpu::ParseDeviceName(backend_->name());
  REWIND_CHECK_MSG(d.ok(), "backend name '%s' is no device name", backend_->name().c_str());
  return *d;
}
std::string Model::device_description() const { return backend_ ? backend_->description() : "cpu"; }
uint64_t Model::device_bytes() const { return backend_ ? backend_->device_bytes() : 0; }
uint64_t Model::device_forward_bytes(int32_t rows, int32_t out_rows) const {
  return backend_ ? backend_->forward_bytes(rows, out_rows) : 0;
}
std::string Model::device_type() const { return backend_ ? backend_->device_type() : "cpu"; }
uint64_t Model::device_memory_total() const { return backend_ ? backend_->device_memory_total() : 0; }
uint64_t Model::device_max_buffer_bytes() const { return backend_ ? backend_->max_buffer_bytes() : 0; }
Status Model::PlaceStorage(KvStorage& kv, StateStorage& states) {
  return backend_ ? backend_->Place(kv, states) : Status::Ok();
}
uint64_t Model::device_kv_bytes() const { return backend_ ? backend_->device_kv_bytes() : 0; }
uint64_t Model::device_weights_bytes() const { return backend_ ? backend_->device_weights_bytes() : 0; }
uint64_t Model::device_state_bytes() const { return backend_ ? backend_->device_state_bytes() : 0; }
uint64_t Model::replay_bytes_to_device() const { return backend_ ? backend_->replay_bytes_to_device() : 0; }
DeviceCounters Model::device_counters() const { return backend_ ? backend_->device_counters() : DeviceCounters{}; }

// Bytes of weights a decode step reads: every tensor except the token embedding (one row per token), unless the
// embedding doubles as the output head (tied), in which case it is read whole; of a stacked expert tensor
// (`*_exps.*`), the n_expert_used experts a token is routed to.
Status Model::SetDeviceProfiling(bool on) {
  if (!backend_) return Error::InvalidArgument("device profiling needs a device (--device vulkanN)");
  return backend_->SetProfiling(on);
}

std::vector<DeviceProfileRow> Model::TakeDeviceProfile() {
  return backend_ ? backend_->TakeProfile() : std::vector<DeviceProfileRow>{};
}

uint64_t Model::decode_weight_bytes() const {
  uint64_t total = 0;
  bool tied = file().FindTensor("output.weight") == nullptr;
  const auto& cfg = config();
  for (const auto& t : file().tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    // MTP block tensors are not read by the trunk.
    if (cfg.n_nextn > 0 && t.name.rfind("blk.", 0) == 0) {
      int layer = std::atoi(t.name.c_str() + 4);
      if (layer >= cfg.n_layer) continue;
    }
    if (cfg.n_expert > 0 && t.name.find("_exps.") != std::string::npos) {
      total += t.nbytes / static_cast<uint64_t>(cfg.n_expert) * static_cast<uint64_t>(cfg.n_expert_used);
      continue;
    }
    total += t.nbytes;
  }
  return total;
}


void Model::SetThreads(int32_t n_threads) { pool_ = std::make_unique<kernels::ThreadPool>(std::max(1, n_threads)); }

KvStorageConfig Model::MakeKvConfig(int32_t n_pages, int32_t page_size, KvTypes type) const {
  KvStorageConfig c;
  c.n_layers = cfg_.n_attn_layers();
  c.row_width = cfg_.n_head_kv * cfg_.head_dim;
  c.page_size = page_size;
  c.n_pages = n_pages;
  c.type = type;
  c.head_dim = cfg_.head_dim;
  return c;
}

StateShape Model::MakeStateShape() const {
  StateShape s;
  s.n_layers = cfg_.n_recurrent_layers();
  s.channels = cfg_.ssm_conv_dim();
  s.conv_len = cfg_.ssm_conv_kernel - 1;
  s.n_heads = cfg_.ssm_heads;
  s.head_dim = cfg_.ssm_head_dim();
  s.state_cols = cfg_.is_mamba2() ? cfg_.ssm_state : 0;
  return s;
}

namespace {

bool SameShape(const StateShape& a, const StateShape& b) {
  return a.n_layers == b.n_layers && a.channels == b.channels && a.conv_len == b.conv_len &&
         a.n_heads == b.n_heads && a.head_dim == b.head_dim && a.cols() == b.cols();
}

// A replay log recorded by this model: ReplayBytesPerToken per logged token.
// Host rows: exactly that many; rows on a device: a buffer that holds them (and the CPU forward cannot read it).
bool LogFitsModel(const ModelConfig& c, const ReplaySeqLog& log, bool on_device) {
  if (log.n_tokens < 0) return false;
  const uint64_t bytes = static_cast<uint64_t>(log.n_tokens) * c.ReplayBytesPerToken();
  if (log.device != nullptr) return on_device && log.device->capacity_floats() * sizeof(float) >= bytes;
  return log.rows.size() * sizeof(float) == bytes;
}

}  // namespace

// ForwardOptions::top_k on the host: out->logits rows -> out->top, the logits cleared.
static void SelectTopLogits(int32_t k, int32_t V, ForwardOutput* out) {
  const size_t rows = V > 0 ? out->logits.size() / V : 0;
  out->top_k = k;
  out->top.resize(rows * k);
  for (size_t r = 0; r < rows; ++r) kernels::TopLogits(out->Row(static_cast<int32_t>(r)), k, out->top.data() + r * k);
  out->logits.clear();
}

Status Model::Forward(std::span<const BatchSeq> batch, KvStorage& kv, StateStorage& states, ForwardOutput* out,
                      const ForwardOptions& options) {
  const ModelConfig& c = cfg_;
  const int32_t E = c.n_embd, V = c.n_vocab;
  // ---- Validate everything before writing anything.
  if (options.top_k < 0 || options.top_k > kernels::kMaxTopLogits)
    return Error::InvalidArgument("top_k " + std::to_string(options.top_k) + " is outside [0, " +
                                  std::to_string(kernels::kMaxTopLogits) + "]");
  const int32_t top_k = std::min(options.top_k, V);
  if (backend_ && (options.want_hidden || options.hidden_all))
    return Error::Unsupported("the GPU backend (" + backend_->name() +
                              ") does not return hidden rows yet (the MTP head needs them; use --device cpu)");
  const KvStorageConfig want_kv = MakeKvConfig(kv.n_pages(), kv.page_size(), kv.config().type);
  if (c.n_attn_layers() > 0 && (kv.config().n_layers != want_kv.n_layers || kv.config().row_width != want_kv.row_width))
    return Error::InvalidArgument("KV storage is not shaped for this model");
  if (!SameShape(states.shape(), MakeStateShape()))
    return Error::InvalidArgument("state storage is not shaped for this model");
  std::set<int32_t> outs;
  int64_t n_rows = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const BatchSeq& b = batch[s];
    const std::string where = "batch sequence " + std::to_string(s) + ": ";
    if (b.tokens.empty()) return Error::InvalidArgument(where + "no tokens");
    if (b.pos0 < 0) return Error::InvalidArgument(where + "negative start position");
    for (size_t j = 0; j < b.tokens.size(); ++j) {
      const int32_t tok = b.tokens[j];
      const bool image_row = b.images != nullptr && b.images->Find(b.pos0 + static_cast<int32_t>(j)) != nullptr;
      if (!image_row && (tok < 0 || tok >= V))
        return Error::InvalidArgument(where + "token id " + std::to_string(tok) + " out of range [0, " +
                                      std::to_string(V) + ")");
    }
    if (b.state_out < 0 || b.state_out >= states.n_slots() || b.state_in < -1 || b.state_in >= states.n_slots())
      return Error::InvalidArgument(where + "state slot out of range");
    if (!outs.insert(b.state_out).second) return Error::InvalidArgument(where + "state_out shared with another sequence");
    if (b.prefix_rows != 0) {
      if (b.prefix == nullptr || b.state_in < 0 || b.prefix_rows < 0 || b.prefix_rows > b.prefix->n_tokens)
        return Error::InvalidArgument(where + "replay prefix without a log, a start state or enough rows");
      if (!LogFitsModel(c, *b.prefix, backend_ != nullptr)) return Error::InvalidArgument(where + "replay prefix log does not match this model");
    }
    if (c.n_attn_layers() > 0) {
      const int64_t end = static_cast<int64_t>(b.pos0) + b.tokens.size();
      const int64_t need = (end + kv.page_size() - 1) / kv.page_size();
      if (static_cast<int64_t>(b.pages.size()) < need)
        return Error::InvalidArgument(where + "page table covers " + std::to_string(b.pages.size()) +
                                      " pages, positions up to " + std::to_string(end) + " need " +
                                      std::to_string(need));
      for (int64_t p = 0; p < need; ++p)
        if (b.pages[p] < 0 || b.pages[p] >= kv.n_pages())
          return Error::InvalidArgument(where + "page id " + std::to_string(b.pages[p]) + " out of range");
    }
    n_rows += b.tokens.size();
  }
  for (size_t s = 0; s < batch.size(); ++s)
    if (batch[s].state_in >= 0 && batch[s].state_in != batch[s].state_out && outs.count(batch[s].state_in))
      return Error::InvalidArgument("batch sequence " + std::to_string(s) +
                                    ": state_in is another sequence's state_out");
  if (n_rows > (1 << 30)) return Error::OutOfRange("batch too large");
  const int32_t N = static_cast<int32_t>(n_rows);

  // ---- Resolve rows, prepare states and the replay log.
  std::vector<internal::SeqRun> seqs(batch.size());
  int32_t row = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    seqs[s] = {row, static_cast<int32_t>(batch[s].tokens.size()), batch[s].pos0, batch[s].state_out, batch[s].pages};
    seqs[s].prefix = batch[s].prefix;
    seqs[s].prefix_rows = batch[s].prefix_rows;
    seqs[s].images = batch[s].images;
    row += seqs[s].n;
    if (batch[s].state_in < 0) {
      states.Clear(batch[s].state_out);
    } else {
      seqs[s].slot_in = batch[s].state_in;  // read by each GDN layer's first token: no separate state copy
    }
  }
  if (options.replay != nullptr) {
    // Row buffers the caller passes in are reused, and resized without clearing (BigVector): every recurrent
    // layer writes all of its row floats for every token (RecordReplayRows checks), and clearing a 512-token
    // prefill's log (228 MiB at the 0.8B shape) on the engine thread cost more than a tenth of the prefill.
    options.replay->seqs.resize(batch.size());
    const uint64_t per_tok = c.ReplayBytesPerToken() / sizeof(float);
    for (size_t s = 0; s < batch.size(); ++s) {
      // With a replay prefix the log covers the whole run from state_in: the prefix rows, then the batch's.
      const int32_t n = seqs[s].prefix_rows + seqs[s].n;
      options.replay->seqs[s].n_tokens = n;
      if (backend_) {  // the backend records into the log's device rows; the host buffer keeps its capacity
        options.replay->seqs[s].rows.clear();
      } else {
        options.replay->seqs[s].device.reset();
        options.replay->seqs[s].rows.resize(per_tok * n);
      }
    }
  }

  out->top_k = 0;
  out->top.clear();
  if (backend_) {
    REWIND_RETURN_IF_ERROR(backend_->Forward(batch, seqs, N, kv, states, out, options.replay, top_k));
    if (top_k > 0 && out->top_k == 0) SelectTopLogits(top_k, V, out);
    return Status::Ok();
  }

  // ---- Embeddings.
  // Residual stream x, normed rows t, block output y: [N][E] each, reused across calls (kernels/alloc_tuning.h).
  thread_local kernels::ScratchBuffer<float> x_buf, t_buf, y_buf;
  const size_t NE = static_cast<size_t>(N) * E;
  float* x = x_buf.Get(NE);
  float* t = t_buf.Get(NE);
  float* y = y_buf.Get(NE);
  for (size_t s = 0; s < batch.size(); ++s)
    for (int32_t j = 0; j < seqs[s].n; ++j) {
      float* row = x + static_cast<int64_t>(seqs[s].row0 + j) * E;
      const ImageSpan* img = batch[s].images ? batch[s].images->Find(batch[s].pos0 + j) : nullptr;
      if (img != nullptr) {
        std::memcpy(row, img->rows + static_cast<int64_t>(batch[s].pos0 + j - img->start) * E, E * sizeof(float));
      } else {
        kernels::DequantizeRowTo(w_.token_embd, batch[s].tokens[j], row);
      }
    }
  if (c.embedding_scale != 0.0f)
    for (size_t i = 0; i < static_cast<size_t>(N) * E; ++i) x[i] = x[i] * c.embedding_scale;

  kernels::ThreadPool* pool = pool_.get();
  auto norm_rows = [&](const float* weight) {
    ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) kernels::RmsNorm(x + i * E, weight, E, c.eps, t + i * E);
    });
  };
  auto add_rows = [&]() {
    if (c.residual_scale != 0.0f) {  // Granite: the block output scaled, then added
      for (size_t i = 0; i < NE; ++i) x[i] = x[i] + y[i] * c.residual_scale;
      return;
    }
    for (size_t i = 0; i < NE; ++i) x[i] = x[i] + y[i];
  };

  // ---- Layers.
  for (int32_t il = 0; il < c.n_layer; ++il) {
    const LayerWeights& L = w_.layers[il];
    norm_rows(L.attn_norm);
    switch (c.kinds[il]) {
      case LayerKind::kGdn:
        internal::GdnForward(c, L.gdn, c.kind_index[il], t, N, seqs, states, options.replay, y, pool);
        break;
      case LayerKind::kMamba2:
        internal::Mamba2Forward(c, L.mamba, c.kind_index[il], t, N, seqs, states, options.replay, y, pool);
        break;
      case LayerKind::kShortConv:
        internal::ShortConvForward(c, L.conv, c.kind_index[il], t, N, seqs, states, options.replay, y, pool);
        break;
      case LayerKind::kKda:
        internal::KdaForward(c, L.kda, c.kind_index[il], t, N, seqs, states, options.replay, y, pool);
        break;
      case LayerKind::kAttention:
        if (c.is_kimi()) {
          internal::MlaForward(c, L.mla, c.kind_index[il], t, N, seqs, kv, y, pool);
        } else {
          internal::AttentionForward(c, L.attn, c.kind_index[il], t, N, seqs, kv, y, pool);
        }
        break;
      case LayerKind::kFfn:
        internal::FfnForward(c, L.ffn, t, N, y, pool);
        break;
    }
    add_rows();
    if (L.post_norm == nullptr) continue;  // one sub-layer per block (nemotron_h)
    norm_rows(L.post_norm);
    internal::FfnForward(c, L.ffn, t, N, y, pool);
    add_rows();
  }

  // ---- Output rows: the last token of each sequence, or all of them.
  const std::vector<int32_t> src_rows = internal::SelectOutputRows(c, batch, seqs, out);
  const int32_t n_out = static_cast<int32_t>(src_rows.size());
  std::vector<float> hn(static_cast<size_t>(n_out) * E);  // [n_out][E]
  for (int32_t r = 0; r < n_out; ++r)
    kernels::RmsNorm(x + static_cast<int64_t>(src_rows[r]) * E, w_.output_norm, E, c.eps,
                     hn.data() + static_cast<int64_t>(r) * E);
  out->logits.resize(static_cast<size_t>(n_out) * V);
  if (n_out > 0) kernels::MatMul(w_.output, hn.data(), n_out, out->logits.data(), pool);
  if (c.logit_scale != 0.0f) {  // Granite: logits / logit_scale, as a multiply by the reciprocal (llama.cpp)
    const float inv = 1.0f / c.logit_scale;
    for (float& v : out->logits) v = v * inv;
  }
  if (top_k > 0) SelectTopLogits(top_k, V, out);
  if (options.hidden_all) {
    out->hidden_all.resize(static_cast<size_t>(N) * E);
    for (int32_t r = 0; r < N; ++r)
      kernels::RmsNorm(x + static_cast<int64_t>(r) * E, w_.output_norm, E, c.eps,
                       out->hidden_all.data() + static_cast<int64_t>(r) * E);
  } else {
    out->hidden_all.clear();
  }
  if (options.want_hidden) {
    out->hidden = std::move(hn);
  } else {
    out->hidden.clear();
  }
  return Status::Ok();
}

namespace internal {

std::vector<int32_t> SelectOutputRows(const ModelConfig& c, std::span<const BatchSeq> batch,
                                      std::span<const SeqRun> seqs, ForwardOutput* out) {
  out->n_vocab = c.n_vocab;
  out->n_embd = c.n_embd;
  out->row_seq.clear();
  out->row_pos.clear();
  out->seq_first_row.assign(batch.size(), 0);
  std::vector<int32_t> src_rows;
  for (size_t s = 0; s < batch.size(); ++s) {
    out->seq_first_row[s] = static_cast<int32_t>(src_rows.size());
    const int32_t first = batch[s].no_logits ? seqs[s].n : batch[s].all_logits ? 0 : seqs[s].n - 1;
    for (int32_t j = first; j < seqs[s].n; ++j) {
      src_rows.push_back(seqs[s].row0 + j);
      out->row_seq.push_back(static_cast<int32_t>(s));
      out->row_pos.push_back(seqs[s].pos0 + j);
    }
  }
  return src_rows;
}

}  // namespace internal

Status Model::AppendReplay(ReplaySeqLog& dst, const ReplaySeqLog& tail) const {
  if (!LogFitsModel(cfg_, dst, backend_ != nullptr) || !LogFitsModel(cfg_, tail, backend_ != nullptr))
    return Error::InvalidArgument("replay append: log size does not match this model");
  if (backend_) return backend_->AppendReplay(dst, tail);
  dst.rows.insert(dst.rows.end(), tail.rows.begin(), tail.rows.end());
  dst.n_tokens += tail.n_tokens;
  return Status::Ok();
}

Status Model::ReplayState(int32_t slot_in, int32_t slot_out, const ReplaySeqLog& log, int32_t k,
                          StateStorage& states) const {
  const ModelConfig& c = cfg_;
  if (!SameShape(states.shape(), MakeStateShape()))
    return Error::InvalidArgument("state storage is not shaped for this model");
  if (slot_out < 0 || slot_out >= states.n_slots() || slot_in < -1 || slot_in >= states.n_slots())
    return Error::InvalidArgument("replay: state slot out of range");
  if (k < 0 || k > log.n_tokens) return Error::OutOfRange("replay: k outside [0, logged tokens]");
  const int64_t rw = c.replay_row_floats(), n_rec = c.n_recurrent_layers();
  if (!LogFitsModel(c, log, backend_ != nullptr)) return Error::InvalidArgument("replay: log size does not match this model");
  if (backend_) return backend_->ReplayState(slot_in, slot_out, log, k, states);  // the device's arithmetic
  if (slot_in < 0) states.Clear(slot_out);
  const bool other = slot_in >= 0 && slot_in != slot_out;  // then each layer reads slot_in (fused copy)
  // The layers' logged inputs are independent, so threads take whole layers: one dispatch for the whole
  // rollback instead of three per layer (a rollback of a few tokens is short next to a dispatch).
  std::vector<int32_t> rec_layers;
  for (int32_t il = 0; il < c.n_layer; ++il)
    if (IsRecurrent(c.kinds[il])) rec_layers.push_back(il);
  kernels::ParallelFor(pool_.get(), static_cast<int64_t>(rec_layers.size()), [&](int64_t l0, int64_t l1) {
    for (int64_t l = l0; l < l1; ++l) {
      const int32_t il = rec_layers[l], gi = c.kind_index[il];
      const float* row0 = log.rows.data() + gi * rw;
      const float* conv_in = other ? states.Conv(slot_in, gi) : nullptr;
      const float* state_in = other ? states.Delta(slot_in, gi) : nullptr;
      if (c.kinds[il] == LayerKind::kShortConv) {
        internal::ShortConvUpdate(c, w_.layers[il].conv, row0, n_rec * rw, k, states.Conv(slot_out, gi), nullptr,
                                  nullptr, conv_in);
        continue;
      }
      if (c.kinds[il] == LayerKind::kKda) {
        internal::KdaUpdate(c, w_.layers[il].kda, internal::KdaReplayInputs(c, row0, n_rec * rw, k),
                            states.Conv(slot_out, gi), states.Delta(slot_out, gi), nullptr, nullptr, conv_in,
                            state_in);
        continue;
      }
      if (c.kinds[il] == LayerKind::kMamba2) {
        internal::Mamba2Inputs in;
        in.xbc = row0;
        in.dt = row0 + c.ssm_conv_dim();
        in.stride = n_rec * rw;
        in.T = k;
        internal::Mamba2Update(c, w_.layers[il].mamba, in, states.Conv(slot_out, gi), states.Delta(slot_out, gi),
                               nullptr, nullptr, conv_in, state_in);
        continue;
      }
      internal::GdnInputs in;
      in.qkv = row0;
      in.qkv_stride = n_rec * rw;
      in.b = in.qkv + c.ssm_conv_dim();
      in.a = in.b + c.ssm_heads;
      in.ba_stride = n_rec * rw;
      in.T = k;
      internal::GdnUpdate(c, w_.layers[il].gdn, in, states.Conv(slot_out, gi), states.Delta(slot_out, gi),
                          nullptr, nullptr, conv_in, state_in);
    }
  });
  return Status::Ok();
}

}  // namespace rw::model
