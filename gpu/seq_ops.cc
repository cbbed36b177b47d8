// Dispatch splits of the sequence kernels (gpu/seq_ops.h).
#include "gpu/seq_ops.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/check.h"
#include "gpu/ops.h"

namespace rw::gpu {

namespace {

// How many units (tokens, key blocks) of `per_unit` loop iterations one dispatch may run: all of them without a
// budget, else as many as fit (at least one). llvmpipe counts a loop of n trips as n + 1 back-edges (measured:
// the delta rule with S = 2, 4, 8, 16 ends early after 65,535 / (2S + 3) tokens), so the counts below charge
// every loop one more than its trips.
uint32_t UnitsPerDispatch(const Context& ctx, uint64_t per_unit, uint64_t fixed, uint32_t total) {
  const uint64_t budget = ctx.loop_budget();
  if (budget == 0) return std::max<uint32_t>(total, 1);
  REWIND_CHECK_MSG(fixed + per_unit <= budget, "one unit of %llu loop iterations is over the budget of %llu",
                   static_cast<unsigned long long>(fixed + per_unit), static_cast<unsigned long long>(budget));
  return static_cast<uint32_t>(std::max<uint64_t>(1, (budget - fixed) / per_unit));
}

// Elements per unit of a KV format code: a word of f32, two of f16 / bf16, a block of the quantised types.
uint32_t KvFormatElems(uint32_t code) { return code == 0 ? 1 : code <= 2 ? 2 : 32; }

// The parallel variants' lanes hold 4 dims of a head each.
constexpr uint32_t kAttentionParallelMaxD = 256;

// kAuto's choice on a CPU device (lavapipe), where a workgroup's barriers and per-lane loops cost more than on a
// GPU: the serial kernel measured fastest there (docs/gpu.md "Attention kernels": tiny-qwen35-f32 pp64 at depth
// 4,096 about 2x the parallel ones; the 0.8B shape level with the group kernel).
constexpr AttentionKernel kAttentionOnCpuDevice = AttentionKernel::kSerial;

// Positions per attention span (AttentionSpanBlocks).
constexpr uint32_t kAttentionSpanKeys = 256;

// The span count of rows up to max_pos.
uint32_t AttentionSpans(uint32_t D, uint32_t max_pos) {
  return max_pos / (AttentionBlock(D) * AttentionSpanBlocks(D)) + 1;
}

// The combine kernel's loop iterations for NS spans: per span the fold over a lane's 4 dims; outside: the stores.
uint64_t CombineLoops(uint32_t NS) { return 8ull * NS + 16; }

// The kernel RecordAttention runs for the shape: the forced or picked one, serial for heads over 256, the
// parallel one for a group size the group kernel has no variant for. An error for a forced parallel variant
// with heads over 256.
Expected<AttentionKernel> ResolveAttentionKernel(const Context& ctx, const AttentionShape& sh) {
  AttentionKernel kernel = PickAttentionKernel(ctx, sh.kernel);
  if (sh.D > kAttentionParallelMaxD) {  // a lane of the parallel variants holds at most 4 dims of a head
    if (sh.kernel == AttentionKernel::kParallel || sh.kernel == AttentionKernel::kGroup)
      return Error::Unsupported("the parallel attention kernels take head dims up to 256, not " + std::to_string(sh.D));
    kernel = AttentionKernel::kSerial;
  }
  const uint32_t G = sh.Hkv == 0 ? 0 : sh.Hq / sh.Hkv;
  if (kernel == AttentionKernel::kGroup && G != 2 && G != 4 && G != 8) kernel = AttentionKernel::kParallel;
  return kernel;
}

}  // namespace

void RecordGdnConv(Context& ctx, const Buffer& x, const Buffer& w, Buffer& state, Buffer& u, const Buffer& tab,
                   uint32_t n_seqs, uint32_t max_n, uint32_t C, uint32_t Kc, uint32_t x_stride) {
  auto p = ctx.GetPipeline("gdn_conv");
  REWIND_CHECK(p.ok());
  // Per token: the taps (Kc - 1 trips), the window shift (Kc - 2) and the token loop itself.
  const uint32_t step = UnitsPerDispatch(ctx, 2ull * Kc + 3, 0, max_n);
  for (uint32_t t0 = 0; t0 < max_n; t0 += step) {
    struct { uint32_t n_seqs, C, Kc, x_stride, t0, t1; } pc{n_seqs, C, Kc, x_stride, t0, t0 + step};
    ctx.Dispatch(**p, {{&x}, {&w}, {&state}, {&u}, {&tab}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(n_seqs) * C));
  }
}

void RecordGdnDelta(Context& ctx, const Buffer& u, const Buffer& beta, const Buffer& g, Buffer& state, Buffer& o,
                    const Buffer& tab, uint32_t n_seqs, uint32_t max_n, const GdnDeltaShape& sh) {
  auto p = ctx.GetPipeline("gdn_delta");
  REWIND_CHECK(p.ok());
  // Two loops of S per token; the row's copy into shared memory and back once per dispatch.
  const uint32_t step = UnitsPerDispatch(ctx, 2ull * sh.S + 4, 2ull * sh.S, max_n);
  for (uint32_t t0 = 0; t0 < max_n; t0 += step) {
    struct { uint32_t n_seqs, Hv, S, C, Kd, key_div, key_mod, t0, t1; } pc{
        n_seqs, sh.Hv, sh.S, sh.C, sh.Kd, sh.key_div, sh.key_mod, t0, t0 + step};
    ctx.Dispatch(**p, {{&u}, {&beta}, {&g}, {&state}, {&o}, {&tab}}, &pc, sizeof(pc),
                 Groups(static_cast<uint64_t>(n_seqs) * sh.Hv * sh.S));
  }
}

uint32_t AttentionBlock(uint32_t D) {
  uint32_t b = 64;
  while (b > 1 && static_cast<uint64_t>(b) * (3ull * D + 5) + 3ull * D + 16 > 50000) b /= 2;
  return b;
}

uint32_t AttentionSpanBlocks(uint32_t D) { return std::max<uint32_t>(1, kAttentionSpanKeys / AttentionBlock(D)); }

AttentionKernel PickAttentionKernel(const Context& ctx, AttentionKernel forced) {
  if (forced != AttentionKernel::kAuto) return forced;
  return ctx.runs_on_cpu() ? kAttentionOnCpuDevice : AttentionKernel::kParallel;
}

Expected<AttentionKernel> ParseAttentionKernel(const std::string& name) {
  if (name == "auto") return AttentionKernel::kAuto;
  if (name == "serial") return AttentionKernel::kSerial;
  if (name == "parallel") return AttentionKernel::kParallel;
  if (name == "group") return AttentionKernel::kGroup;
  return Error::InvalidArgument("unknown attention kernel '" + name + "' (auto, serial, parallel, group)");
}

Expected<AttentionSplit> ParseAttentionSplit(const std::string& name) {
  if (name == "auto") return AttentionSplit::kAuto;
  if (name == "0") return AttentionSplit::kOff;
  if (name == "1") return AttentionSplit::kOn;
  return Error::InvalidArgument("unknown attention split '" + name + "' (auto, 0, 1)");
}

bool AttentionSplits(const Context& ctx, const AttentionShape& sh, uint32_t max_pos) {
  if (sh.split == AttentionSplit::kOff || sh.N == 0 || sh.Hkv == 0 || sh.D > kAttentionParallelMaxD) return false;
  if (sh.split == AttentionSplit::kAuto && ctx.runs_on_cpu()) return false;
  const uint32_t NS = AttentionSpans(sh.D, max_pos);
  if (NS < 2) return false;
  if (4ull * sh.N * sh.Hq * NS * (sh.D + 2) > kAttentionSplitMaxBytes) return false;
  if (ctx.loop_budget() != 0 && CombineLoops(NS) > ctx.loop_budget()) return false;
  if (sh.split == AttentionSplit::kOn) return true;
  auto kernel = ResolveAttentionKernel(ctx, sh);
  if (!kernel.ok()) return false;
  const uint64_t groups = static_cast<uint64_t>(sh.N) * (*kernel == AttentionKernel::kGroup ? sh.Hkv : sh.Hq);
  return groups < kAttentionSplitBelowGroups;
}

uint64_t AttentionScratchBytes(uint32_t N, uint32_t Hq, uint32_t D) {
  return 4ull * N * Hq * (D + 4) + (D <= kAttentionParallelMaxD ? kAttentionSplitMaxBytes : 0);
}

Status RecordAttention(Context& ctx, const Buffer& q, const Buffer& kp, const Buffer& vp, Buffer& o,
                       const Buffer& rows, const Buffer& pages, uint32_t max_pos, const AttentionShape& sh, Buffer& ml) {
  if (sh.N == 0) return Status::Ok();
  if (sh.page_rows == 0) return Error::InvalidArgument("attention: zero rows per page");
  if (sh.Hkv == 0 || sh.Hq % sh.Hkv != 0) return Error::InvalidArgument("attention: Hq is not a multiple of Hkv");
  REWIND_ASSIGN_OR_RETURN(const AttentionKernel kernel, ResolveAttentionKernel(ctx, sh));
  const uint32_t G = sh.Hq / sh.Hkv;
  const char* name = kernel == AttentionKernel::kSerial     ? "attention"
                     : kernel == AttentionKernel::kParallel ? "attention_par"
                     : G == 2                               ? "attention_gqa2"
                     : G == 4                               ? "attention_gqa4"
                                                            : "attention_gqa8";
  REWIND_ASSIGN_OR_RETURN(const uint32_t kt, KvFormatCode(sh.k_type));
  REWIND_ASSIGN_OR_RETURN(const uint32_t vt, KvFormatCode(sh.v_type));
  if (KvFormatElems(kt) == 32 && sh.D % 32 != 0)  // a head must be whole blocks, as on the CPU
    return Error::InvalidArgument("attention: a block-quantised KV cache needs a head dim that is a multiple of 32");
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline(name));
  const bool split = AttentionSplits(ctx, sh, max_pos);
  const uint32_t B = AttentionBlock(sh.D), SB = AttentionSpanBlocks(sh.D), blocks = max_pos / B + 1;
  const uint32_t NS = split ? AttentionSpans(sh.D, max_pos) : 1;
  const uint64_t rh = static_cast<uint64_t>(sh.N) * sh.Hq;
  const size_t ml_bytes = 4 * (rh * (4 + sh.D) + (split ? rh * NS * (sh.D + 2) : 0));
  if (!ml.valid() || ml.size() < ml_bytes) {
    REWIND_RETURN_IF_ERROR(ctx.Submit());  // recorded work may still use the old buffer
    REWIND_ASSIGN_OR_RETURN(ml, ctx.Alloc(ml_bytes));
  }
  REWIND_CHECK(B <= 64);  // the parallel variants score a block's keys one a lane
  const uint64_t D = sh.D;
  uint32_t step = 0;
  // Split: each workgroup runs its span's blocks (SB units); unsplit: every block of the longest row.
  const uint32_t units = split ? SB : blocks;
  uint64_t groups = rh * NS;
  switch (kernel) {
    case AttentionKernel::kSerial:
      // Per block: two score passes and the value loop over B keys, the rescale, a span's fold; outside: the
      // init and the norm.
      step = UnitsPerDispatch(ctx, static_cast<uint64_t>(B) * (3ull * D + 5) + 2 * D + 10, 2ull * D + 8, units);
      groups = Groups(groups);
      break;
    case AttentionKernel::kParallel:
      // Per lane and block: one score (D), the block max and the weight sum over B keys, the value loop over B
      // keys of up to 4 dims each, the rescale's and a span fold's 4 dims; outside: the loads and stores of 4 dims.
      step = UnitsPerDispatch(ctx, D + 7ull * B + 22, 32, units);
      break;
    default:
      // The same for G heads (loops over heads and dims counted as loops, unrolled or not).
      step = UnitsPerDispatch(ctx, G * (D + 6ull * B + 22) + 10ull * B + 18, 16ull * G + 32, units);
      groups = static_cast<uint64_t>(sh.N) * sh.Hkv * NS;
      break;
  }
  // attention.comp's push constants; the combine kernel (split) takes the same ones.
  struct { uint32_t N, Hq, Hkv, D; float scale; uint32_t B, b0, b1, PS, kt, vt, SB, split, NS; } pc{
      sh.N, sh.Hq, sh.Hkv, sh.D, sh.scale, B, 0, 0, sh.page_rows, kt, vt, SB, split ? 1u : 0u, NS};
  for (uint32_t b0 = 0; b0 < units; b0 += step) {
    pc.b0 = b0;
    pc.b1 = b0 + step;
    ctx.Dispatch(*p, {{&q}, {&kp}, {&vp}, {&o}, {&rows}, {&ml}, {&pages}}, &pc, sizeof(pc),
                 static_cast<uint32_t>(groups));
  }
  if (split) {  // fold each row's span slots in order
    REWIND_ASSIGN_OR_RETURN(Pipeline * c, ctx.GetPipeline("attention_combine"));
    ctx.Dispatch(*c, {{&q}, {&kp}, {&vp}, {&o}, {&rows}, {&ml}, {&pages}}, &pc, sizeof(pc),
                 static_cast<uint32_t>(rh));
  }
  return Status::Ok();
}

Expected<uint32_t> KvFormatCode(gguf::TensorType t) {
  using gguf::TensorType;
  switch (t) {
    case TensorType::kF32: return 0u;
    case TensorType::kF16: return 1u;
    case TensorType::kBF16: return 2u;
    case TensorType::kQ8_0: return 3u;
    case TensorType::kQ4_0: return 4u;
    case TensorType::kQ4_1: return 5u;
    case TensorType::kQ5_0: return 6u;
    case TensorType::kQ5_1: return 7u;
    case TensorType::kIQ4_NL: return 8u;
    default: break;
  }
  return Error::Unsupported(std::string("the GPU KV cache has no type ") + gguf::TypeName(t));
}

Status RecordKvScatter(Context& ctx, const Buffer& x, Buffer& pool, const Buffer& tab, uint32_t n, uint32_t KW,
                       gguf::TensorType t) {
  REWIND_ASSIGN_OR_RETURN(const uint32_t code, KvFormatCode(t));
  const uint32_t per = KvFormatElems(code);
  if (KW % per != 0)
    return Error::InvalidArgument("KV rows of " + std::to_string(KW) + " elements are not whole units of " +
                                  std::to_string(per) + " for " + gguf::TypeName(t));
  if (n == 0) return Status::Ok();
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("kv_scatter"));
  struct { uint32_t n, KW, t; } pc{n, KW, code};
  ctx.Dispatch(*p, {{&x}, {&pool}, {&tab}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(n) * (KW / per)));
  return Status::Ok();
}

Status RecordHadamard(Context& ctx, Buffer& x, uint64_t n, uint32_t size) {
  if (size == 0 || (size & (size - 1)) != 0 || n % size != 0)
    return Error::InvalidArgument("Hadamard rotation: chunks of " + std::to_string(size) + " in " + std::to_string(n));
  if (n == 0) return Status::Ok();
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("hadamard"));
  // The CPU's scale: 1 / sqrt(size) in float.
  struct { uint32_t n_chunks, size; float scale; } pc{static_cast<uint32_t>(n / size), size,
                                                        1.0f / std::sqrt(static_cast<float>(size))};
  ctx.Dispatch(*p, {{&x}}, &pc, sizeof(pc), Groups(pc.n_chunks));
  return Status::Ok();
}

}  // namespace rw::gpu
