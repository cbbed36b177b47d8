// The GPU kernels whose loops run along a sequence (the GDN conv window and delta rule token by token, attention
// over the keys of a position), recorded as one dispatch, or, where the driver limits the loop iterations of an
// invocation (lavapipe: Context::loop_budget), as several dispatches at fixed token / key-block boundaries. The
// arithmetic of an element is the same either way (its running state is in device memory between parts), so a
// device's bits do not depend on the split. docs/gpu.md "Exactness".
#pragma once

#include <cstdint>
#include <string>

#include "base/expected.h"
#include "gguf/types.h"
#include "gpu/vk_context.h"

namespace rw::gpu {

// The GDN short causal convolution and SiLU (gdn_conv.comp) of n_seqs sequences described by `tab`
// ({row0, n, state index, -} each; max_n = the largest n): x [rows][x_stride] raw qkv, w [C][Kc] taps, state
// [states][C][Kc-1] (updated), u [rows][C] output.
void RecordGdnConv(Context& ctx, const Buffer& x, const Buffer& w, Buffer& state, Buffer& u, const Buffer& tab,
                   uint32_t n_seqs, uint32_t max_n, uint32_t C, uint32_t Kc, uint32_t x_stride);

// The gated delta rule (gdn_delta.comp) over the same table: u [rows][C] (q, k normalised), beta and g [rows][Hv],
// state [states][Hv][S][S] (updated), o [rows][Hv·S]. Key head of value head h: (h / key_div) % key_mod.
struct GdnDeltaShape {
  uint32_t Hv = 0, S = 0, C = 0, Kd = 0, key_div = 1, key_mod = 1;
};
void RecordGdnDelta(Context& ctx, const Buffer& u, const Buffer& beta, const Buffer& g, Buffer& state, Buffer& o,
                    const Buffer& tab, uint32_t n_seqs, uint32_t max_n, const GdnDeltaShape& sh);

// Keys per attention block for head size D: fixed by D alone (the same on every device), so that one block's
// loops stay under lavapipe's budget (B·(3D + 5) + 3D + 16 <= 50,000 iterations; D = 256: 32 keys).
uint32_t AttentionBlock(uint32_t D);

// Blocks per attention span for head size D: spans of 256 positions (at least one block). A row's blocks are
// folded span by span in ascending order (attention.comp), so a decode row's spans can run on separate
// workgroups and give the same bits.
uint32_t AttentionSpanBlocks(uint32_t D);

// Causal attention (attention.comp) of N rows x Hq heads: q [N][Hq·D]; K and V read straight from a layer's page
// pools kp / vp ([pool row][Hkv·D] in the shape's k_type / v_type, the CPU's bytes), no gather copy: rows [N][2]
// {offset in `pages` of the row's sequence's page list, position}, the key at position p of that row at pool row
// pages[off + p / page_rows] · page_rows + p % page_rows (max_pos = the largest position); o [N][Hq·D]; ml is
// grown to the scratch it needs (AttentionScratchBytes).
// The kernel variants (attention.comp), one float order, so the same bits (I1): kSerial, one invocation per
// (row, query head) running every key and dimension itself; kParallel, a workgroup of 64 per (row, query head),
// the block's keys scored side by side and the value sums split over the dims, each sum in the serial order;
// kGroup, kParallel's arithmetic with a workgroup per (row, KV head) running the G query heads of its GQA group
// (G = 2, 4 or 8; otherwise kParallel runs), each V element read once for the group. kAuto: kParallel on a GPU
// (kGroup is not measured on one yet); on a CPU device (lavapipe), where the workgroup's barriers are dear,
// whichever measured faster there (PickAttentionKernel). Head dims over 256 always run kSerial.
enum class AttentionKernel { kAuto, kSerial, kParallel, kGroup };

// Whether the rows' spans run on workgroups of their own (a workgroup per (row, head, span), then the combine
// kernel folds the spans in order: the same bits as one workgroup folding them as it goes). kAuto: on a GPU
// when the unsplit kernel would run fewer than kAttentionSplitBelowGroups workgroups (decode and verify rows at
// depth), never on a CPU device (lavapipe: more workgroups than cores gain nothing). kOn: wherever it can.
// Either way only for head dims up to 256, at least two spans, span slots of at most kAttentionSplitMaxBytes
// and a combine loop within the device's loop budget.
enum class AttentionSplit { kAuto, kOff, kOn };
inline constexpr uint64_t kAttentionSplitBelowGroups = 256;
inline constexpr uint64_t kAttentionSplitMaxBytes = 32ull << 20;

struct AttentionShape {
  uint32_t N = 0, Hq = 0, Hkv = 0, D = 0;
  float scale = 1.0f;
  uint32_t page_rows = 1;  // rows per page of the pools
  // The pools' element types (KvFormatCode's), dequantised in the kernel with the CPU's exact arithmetic.
  gguf::TensorType k_type = gguf::TensorType::kF32, v_type = gguf::TensorType::kF32;
  AttentionKernel kernel = AttentionKernel::kAuto;  // tests and REWIND_GPU_ATTENTION force a variant
  AttentionSplit split = AttentionSplit::kAuto;     // tests and REWIND_GPU_ATTENTION_SPLIT force it
};

// The variant kAuto resolves to on this device (a forced one is kept).
AttentionKernel PickAttentionKernel(const Context& ctx, AttentionKernel forced);

// "serial" / "parallel" / "group" / "auto" (the REWIND_GPU_ATTENTION switch of the GPU backend); anything else: an error.
Expected<AttentionKernel> ParseAttentionKernel(const std::string& name);
// "auto" / "0" / "1" (the REWIND_GPU_ATTENTION_SPLIT switch of the GPU backend); anything else: an error.
Expected<AttentionSplit> ParseAttentionSplit(const std::string& name);

// Whether RecordAttention splits the shape's rows by span (AttentionSplit) for positions up to max_pos.
bool AttentionSplits(const Context& ctx, const AttentionShape& sh, uint32_t max_pos);

// The most bytes RecordAttention grows its scratch (`ml`) to for N rows: the states kept between dispatches
// (4 + D floats a row and head) and the split's span slots (at most kAttentionSplitMaxBytes).
uint64_t AttentionScratchBytes(uint32_t N, uint32_t Hq, uint32_t D);

Status RecordAttention(Context& ctx, const Buffer& q, const Buffer& kp, const Buffer& vp, Buffer& o,
                       const Buffer& rows, const Buffer& pages, uint32_t max_pos, const AttentionShape& sh, Buffer& ml);

// The KV cache element types of the device page pools (kv_types.glsl): F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1 and IQ4_NL, the types of --cache-type-k / -v; the shader code of t, or an error naming the type.
Expected<uint32_t> KvFormatCode(gguf::TensorType t);

// Stores rows of x ([N][KW] floats) into a layer's page pool of type t (kv_scatter.comp): tab [n][2] {row of x,
// pool row}. The bytes are the CPU's kernels::QuantizeKvRow's (KW a multiple of 32 for the block types, even
// for f16 / bf16).
Status RecordKvScatter(Context& ctx, const Buffer& x, Buffer& pool, const Buffer& tab, uint32_t n, uint32_t KW,
                       gguf::TensorType t);

// x[0..n) = H·x per chunk of `size` floats (hadamard.comp; size a power of two dividing n): the bits of the CPU's
// kernels::HadamardRotate.
Status RecordHadamard(Context& ctx, Buffer& x, uint64_t n, uint32_t size);

}  // namespace rw::gpu
