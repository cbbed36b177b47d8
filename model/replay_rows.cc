// Replay-log rows of the recurrent layers (GDN and Mamba-2): the raw per-token inputs of a state update, in
// the layout ReplaySeqLog documents ([token][recurrent layer][replay_row_floats]).
#include <cstring>

#include "base/check.h"
#include "kernels/alloc_tuning.h"
#include "model/layers.h"

namespace rw::model::internal {
namespace {

void CopyRow(std::span<const RowPiece> pieces, int64_t row, float* dst) {
  for (const RowPiece& p : pieces) {
    std::memcpy(dst, p.base + row * p.stride, p.width * sizeof(float));
    dst += p.width;
  }
}

}  // namespace

void RecordReplayRows(const ModelConfig& cfg, int32_t rec_index, std::span<const SeqRun> seqs,
                      std::span<const RowPiece> pieces, ReplayLog* replay) {
  const int64_t rw = cfg.replay_row_floats(), n_rec = cfg.n_recurrent_layers();
  // Every float of a row is written (Model::Forward hands in recycled buffers without clearing them).
  int64_t width = 0;
  for (const RowPiece& p : pieces) width += p.width;
  REWIND_CHECK_MSG(width == rw, "replay row pieces cover %lld of %lld floats", static_cast<long long>(width),
                   static_cast<long long>(rw));
  for (size_t s = 0; s < seqs.size(); ++s) {
    float* dst = replay->seqs[s].rows.data();
    const int32_t P = seqs[s].prefix != nullptr ? seqs[s].prefix_rows : 0;
    for (int32_t j = 0; j < P; ++j)
      std::memcpy(dst + (j * n_rec + rec_index) * rw,
                  seqs[s].prefix->rows.data() + (j * n_rec + rec_index) * rw, rw * sizeof(float));
    for (int32_t j = 0; j < seqs[s].n; ++j)
      CopyRow(pieces, seqs[s].row0 + j, dst + ((P + j) * n_rec + rec_index) * rw);
  }
}

const float* JoinPrefixRows(const ModelConfig& cfg, int32_t rec_index, const SeqRun& s,
                            std::span<const RowPiece> pieces) {
  const int64_t rw = cfg.replay_row_floats(), n_rec = cfg.n_recurrent_layers();
  const int32_t P = s.prefix_rows;
  thread_local kernels::ScratchBuffer<float> buf;
  float* rows = buf.Get(static_cast<size_t>((P + s.n) * rw));  // [P + n][rw]
  for (int32_t j = 0; j < P; ++j)
    std::memcpy(rows + j * rw, s.prefix->rows.data() + (j * n_rec + rec_index) * rw, rw * sizeof(float));
  for (int32_t j = 0; j < s.n; ++j) CopyRow(pieces, s.row0 + j, rows + (P + j) * rw);
  return rows;
}

}  // namespace rw::model::internal
