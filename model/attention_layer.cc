// Gated full attention (spec model-qwen35.md 7.2) over the paged KV storage; with cfg.attn_gated / attn_rope
// false and no q/k norm weights, the plain attention of nemotron_h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/activation.h"
#include "kernels/alloc_tuning.h"
#include "kernels/attention.h"
#include "kernels/kv_quant.h"
#include "kernels/matmul.h"
#include "kernels/norm.h"
#include "kernels/rope.h"
#include "model/layers.h"

namespace rw::model::internal {

using kernels::ParallelFor;

namespace {

// Queries per attention work item in prefill (query heads of a GQA group x tokens): each item reads its
// sequence's K/V once, so larger tiles read the cache fewer times.
constexpr int32_t kTileQueries = 64;

}  // namespace

kernels::RopeParams MakeRope(const ModelConfig& c) {
  kernels::RopeParams p;
  p.n_rot = c.n_rot;
  p.freq_base = c.rope_freq_base;
  p.freq_scale = c.rope_freq_scale;
  p.imrope = c.imrope;
  p.sections = c.rope_sections;
  p.yarn = c.rope_yarn;
  p.yarn_attn_factor = c.rope_attn_factor;
  p.n_ctx_orig = c.rope_n_ctx_orig;
  return p;
}

void StoreKvRow(KvStorage& kv, int32_t attn_index, const SeqRun& s, int32_t pos, const float* k, const float* v) {
  const int32_t ps = kv.page_size(), page = s.pages[pos / ps];
  const int64_t row = pos % ps, n = kv.config().row_width;
  // Each row is quantised on its own (kernels/kv_quant.h): its bytes depend on this token only (I1).
  kernels::QuantizeKvRow(kv.config().type.k, k, kv.K(attn_index, page) + row * kv.k_row_bytes(), n);
  kernels::QuantizeKvRow(kv.config().type.v, v, kv.V(attn_index, page) + row * kv.v_row_bytes(), n);
}

std::vector<int32_t> RowPositions(std::span<const SeqRun> seqs, int32_t N) {
  std::vector<int32_t> row_pos(N);
  for (const SeqRun& s : seqs)
    for (int32_t j = 0; j < s.n; ++j) row_pos[s.row0 + j] = s.pos0 + j;
  return row_pos;
}

void AttendRows(const float* q, int32_t Hq, int32_t Hkv, int32_t D, float scale, int32_t attn_index,
                std::span<const SeqRun> seqs, std::span<const int32_t> row_pos, const KvStorage& kv, float* att,
                kernels::ThreadPool* pool) {
  const int32_t ps = kv.page_size(), QW = Hq * D, KW = Hkv * D;
  const KvTypes types = kv.config().type;
  // Page pointers per sequence.
  std::vector<std::vector<const uint8_t*>> kp(seqs.size()), vp(seqs.size());
  std::vector<kernels::KvPages> views(seqs.size());
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int32_t n_pages = (seqs[s].pos0 + seqs[s].n + ps - 1) / ps;
    for (int32_t p = 0; p < n_pages; ++p) {
      kp[s].push_back(kv.K(attn_index, seqs[s].pages[p]));
      vp[s].push_back(kv.V(attn_index, seqs[s].pages[p]));
    }
    views[s] = {kp[s].data(), vp[s].data(), ps, KW, types.k, types.v};
  }
  // Work items are (sequence, KV head, a tile of tokens with all the group's query heads): their queries share
  // every K/V block, read and converted once per item (kernels/attention.h; the tiling changes nothing but
  // speed: every query gets the bits of its own AttendOne call).
  const int32_t group = Hq / Hkv;
  const int32_t tok_tile = std::max(1, kTileQueries / group);
  struct Item {
    int32_t seq, kvh, i0, i1;  // batch rows [i0, i1), query heads [kvh·group, (kvh + 1)·group)
  };
  std::vector<Item> items;
  int32_t max_keys = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    max_keys = std::max(max_keys, seqs[s].pos0 + seqs[s].n);
    for (int32_t kvh = 0; kvh < Hkv; ++kvh)
      for (int32_t t0 = 0; t0 < seqs[s].n; t0 += tok_tile)
        items.push_back({static_cast<int32_t>(s), kvh, seqs[s].row0 + t0,
                         seqs[s].row0 + std::min(seqs[s].n, t0 + tok_tile)});
  }
  auto queries_of = [&](const Item& it, std::vector<kernels::AttendQuery>& out) {
    out.clear();
    for (int32_t i = it.i0; i < it.i1; ++i)
      for (int32_t h = it.kvh * group; h < (it.kvh + 1) * group; ++h)
        out.push_back({q + static_cast<int64_t>(i) * QW + h * D, att + static_cast<int64_t>(i) * QW + h * D,
                       row_pos[i] + 1});
  };
  const int32_t threads = pool != nullptr ? pool->size() : 1;
  if (static_cast<int32_t>(items.size()) >= 2 * threads || max_keys < 2 * kernels::kAttnSegment) {
    ParallelFor(pool, static_cast<int64_t>(items.size()), [&](int64_t j0, int64_t j1) {
      thread_local std::vector<kernels::AttendQuery> queries;
      for (int64_t j = j0; j < j1; ++j) {
        queries_of(items[j], queries);
        kernels::AttendGroup(queries.data(), static_cast<int32_t>(queries.size()), D, items[j].kvh,
                             views[items[j].seq], scale);
      }
    });
    return;
  }
  // Few items over a long context (decode at depth): each item's keys split into their fixed segments over the
  // threads, then the segments merged in order (the same bits as AttendGroup, kernels/attention.h).
  struct Part {
    int32_t item, seg;
    size_t at;  // offset of its partials
  };
  std::vector<Part> parts;
  std::vector<size_t> first_part(items.size());
  size_t floats = 0;
  for (size_t j = 0; j < items.size(); ++j) {
    const Item& it = items[j];
    const int32_t nq = (it.i1 - it.i0) * group;
    first_part[j] = parts.size();
    for (int32_t seg = 0; seg < kernels::AttnSegments(row_pos[it.i1 - 1] + 1); ++seg) {
      parts.push_back({static_cast<int32_t>(j), seg, floats});
      floats += static_cast<size_t>(nq) * kernels::AttnPartialFloats(D);
    }
  }
  thread_local kernels::ScratchBuffer<float> partial_buf;
  float* partials = partial_buf.Get(floats);
  ParallelFor(pool, static_cast<int64_t>(parts.size()), [&](int64_t j0, int64_t j1) {
    thread_local std::vector<kernels::AttendQuery> queries;
    for (int64_t j = j0; j < j1; ++j) {
      const Item& it = items[parts[j].item];
      queries_of(it, queries);
      kernels::AttendSegment(queries.data(), static_cast<int32_t>(queries.size()), D, it.kvh, views[it.seq], scale,
                             parts[j].seg, partials + parts[j].at);
    }
  });
  ParallelFor(pool, static_cast<int64_t>(items.size()), [&](int64_t j0, int64_t j1) {
    thread_local std::vector<kernels::AttendQuery> queries;
    std::vector<const float*> segs;
    for (int64_t j = j0; j < j1; ++j) {
      queries_of(items[j], queries);
      segs.clear();
      for (size_t k = first_part[j]; k < parts.size() && parts[k].item == j; ++k) segs.push_back(partials + parts[k].at);
      kernels::AttendCombine(queries.data(), static_cast<int32_t>(queries.size()), D, segs.data(),
                             static_cast<int32_t>(segs.size()));
    }
  });
}

void AttentionForward(const ModelConfig& cfg, const AttnWeights& w, int32_t attn_index, const float* t,
                      int32_t N, std::span<const SeqRun> seqs, KvStorage& kv, float* out,
                      kernels::ThreadPool* pool, bool kv_only) {
  const int32_t D = cfg.head_dim, Hq = cfg.n_head, Hkv = cfg.n_head_kv, QW = Hq * D, KW = Hkv * D;
  const int32_t qm = cfg.attn_gated ? 2 : 1;  // plain attention: attn_q rows are q only
  const KvTypes types = kv.config().type;
  // Hadamard rotation of quantised caches, as llama.cpp does it (kernels/kv_quant.h): Q and K heads when K is a
  // block type, V heads (and back on the output) when V is.
  const int32_t rot_k = kernels::KvRotationSize(types.k, D, true);
  const int32_t rot_v = kernels::KvRotationSize(types.v, D, false);
  thread_local kernels::ScratchBuffer<float> qg_buf, k_buf, v_buf, q_buf, gate_buf, att_buf;
  float* qg = qg_buf.Get(static_cast<size_t>(N) * qm * QW);  // [N][Hq][q D | gate D] (plain: [N][Hq][q D])
  float* k = k_buf.Get(static_cast<size_t>(N) * KW);        // [N][Hkv·D]
  float* v = v_buf.Get(static_cast<size_t>(N) * KW);        // [N][Hkv·D]
  // Q, K and V projections in one region.
  std::vector<kernels::MatMulJob> proj;
  if (!kv_only) proj.push_back(kernels::Product(w.q, t, N, qg));
  proj.push_back(kernels::Product(w.k, t, N, k));
  proj.push_back(kernels::Product(w.v, t, N, v));
  kernels::MatMulMany(proj, pool);

  const std::vector<int32_t> row_pos = RowPositions(seqs, N);
  std::vector<int32_t> row_seq(N);
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int32_t j = 0; j < seqs[s].n; ++j) row_seq[seqs[s].row0 + j] = static_cast<int32_t>(s);

  // Per-head norms + RoPE; K and V go to the pages.
  const kernels::RopeParams rope = MakeRope(cfg);
  const auto rope_apply = cfg.rope_adjacent ? kernels::RopeApplyAdjacent : kernels::RopeApply;
  float* q = q_buf.Get(static_cast<size_t>(N) * QW);        // [N][Hq·D]
  float* gate = gate_buf.Get(static_cast<size_t>(N) * QW);  // [N][Hq·D]
  ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
    std::vector<float> cache(cfg.n_rot);
    for (int64_t i = i0; i < i1; ++i) {
      const int32_t pos = row_pos[i];
      if (cfg.attn_rope) {
        const SeqImages* images = seqs[row_seq[i]].images;
        if (images != nullptr && !images->empty()) {
          kernels::RopeCacheMulti(rope, images->RopePos(pos), cache.data());
        } else {
          kernels::RopeCache(rope, pos, cache.data());
        }
      }
      for (int32_t h = 0; h < (kv_only ? 0 : Hq); ++h) {
        const float* src = qg + i * qm * QW + qm * h * D;
        float* qh = q + i * QW + h * D;
        if (w.q_norm != nullptr) kernels::RmsNorm(src, w.q_norm, D, cfg.eps, qh);
        else std::memcpy(qh, src, D * sizeof(float));
        if (cfg.attn_rope) rope_apply(cache.data(), cfg.n_rot, qh);
        if (rot_k > 0) kernels::HadamardRotate(qh, D, rot_k);
        if (cfg.attn_gated) std::memcpy(gate + i * QW + h * D, src + D, D * sizeof(float));
      }
      for (int32_t j = 0; j < Hkv; ++j) {
        float* kj = k + i * KW + j * D;
        if (w.k_norm != nullptr) kernels::RmsNorm(kj, w.k_norm, D, cfg.eps, kj);
        if (cfg.attn_rope) rope_apply(cache.data(), cfg.n_rot, kj);
      }
      if (rot_k > 0) kernels::HadamardRotate(k + i * KW, KW, rot_k);
      if (rot_v > 0) kernels::HadamardRotate(v + i * KW, KW, rot_v);
      StoreKvRow(kv, attn_index, seqs[row_seq[i]], pos, k + i * KW, v + i * KW);
    }
  });
  if (kv_only) return;  // only the K/V rows were wanted (the MTP head keeping its cache in step)

  const float scale = cfg.attn_scale != 0.0f ? cfg.attn_scale : 1.0f / std::sqrt(static_cast<float>(D));
  float* att = att_buf.Get(static_cast<size_t>(N) * QW);  // [N][Hq·D]
  AttendRows(q, Hq, Hkv, D, scale, attn_index, seqs, row_pos, kv, att, pool);
  // Back from the rotated V space, then the output gate.
  if (rot_v > 0 || cfg.attn_gated)
    ParallelFor(pool, N, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        for (int32_t h = 0; h < Hq; ++h) {
          float* oh = att + i * QW + h * D;
          if (rot_v > 0) kernels::HadamardRotate(oh, D, rot_v);
          if (cfg.attn_gated) kernels::MulSigmoid(oh, gate + i * QW + h * D, D);
        }
    });
  kernels::MatMul(w.out, att, N, out, pool);
}

}  // namespace rw::model::internal
