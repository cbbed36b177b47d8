// GPU kernels: dispatch shapes and the shader of each weight type (gpu/ops.h).
#include "gpu/ops.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/check.h"
#include "gguf/quants.h"

namespace rw::gpu {

namespace {

const char* MatMulShader(gguf::TensorType t) {
  using TT = gguf::TensorType;
  switch (t) {
    case TT::kF32: return "matmul_f32";
    case TT::kF16: return "matmul_f16";
    case TT::kBF16: return "matmul_bf16";
    case TT::kQ8_0: return "matmul_q8_0";
    case TT::kQ4_0: return "matmul_q4_0";
    case TT::kQ4_1: return "matmul_q4_1";
    case TT::kQ5_0: return "matmul_q5_0";
    case TT::kQ5_1: return "matmul_q5_1";
    case TT::kQ4_K: return "matmul_q4_k";
    case TT::kQ5_K: return "matmul_q5_k";
    case TT::kQ6_K: return "matmul_q6_k";
    default: return nullptr;
  }
}

// The activation quantiser of a weight type, and its block size (nullptr: F32 activations are used in place).
const char* ActShader(gguf::TensorType w, uint32_t* block) {
  using TT = gguf::TensorType;
  switch (gguf::VecDotType(w)) {
    case TT::kQ8_0: *block = 32; return "quant_q8_0";
    case TT::kQ8_1: *block = 32; return "quant_q8_1";
    case TT::kQ8_K: *block = 256; return "quant_q8_k";
    case TT::kF16: *block = 1; return "quant_f16";
    case TT::kBF16: *block = 1; return "quant_bf16";
    default: *block = 1; return nullptr;
  }
}

Status Grow(Context& ctx, Buffer& b, size_t bytes) {
  if (b.valid() && b.size() >= bytes) return Status::Ok();
  REWIND_RETURN_IF_ERROR(ctx.Submit());  // recorded work may still read the old buffer
  REWIND_ASSIGN_OR_RETURN(b, ctx.Alloc(bytes));
  return Status::Ok();
}

}  // namespace

bool GpuMatMulSupports(gguf::TensorType type) { return MatMulShader(type) != nullptr; }

Expected<GpuMatrix> UploadMatrix(Context& ctx, gguf::TensorType type, const uint8_t* data, int64_t n_cols,
                                 int64_t n_rows, uint64_t row_bytes, int64_t row_group) {
  if (!GpuMatMulSupports(type))
    return Error::Unsupported(std::string("the GPU backend does not support weight type ") +
                              gguf::TypeName(type) + " yet (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)");
  if (n_cols % gguf::BlockSize(type) != 0) return Error::InvalidArgument("weight row is not whole blocks");
  GpuMatrix m;
  m.type = type;
  m.n_cols = n_cols;
  m.n_rows = n_rows;
  m.row_bytes = row_bytes;
  REWIND_CHECK(row_group >= 1 && n_rows % row_group == 0);
  const uint64_t group_bytes = row_bytes * static_cast<uint64_t>(row_group);
  if (group_bytes > ctx.max_buffer_bytes())
    return Error::Exhausted("a weight's row group of " + std::to_string(group_bytes) +
                            " bytes is over this device's storage buffer range of " +
                            std::to_string(ctx.max_buffer_bytes()) + " bytes");
  const int64_t per_part = static_cast<int64_t>(ctx.max_buffer_bytes() / group_bytes) * row_group;
  for (int64_t r0 = 0; r0 < std::max<int64_t>(n_rows, 1); r0 += per_part) {
    GpuMatrixPart p;
    p.row0 = r0;
    p.rows = std::min(per_part, n_rows - r0);
    const size_t bytes = static_cast<size_t>(row_bytes * p.rows);
    REWIND_ASSIGN_OR_RETURN(p.data, ctx.Alloc(bytes));
    REWIND_RETURN_IF_ERROR(ctx.Upload(p.data, data + row_bytes * r0, bytes));
    m.parts.push_back(std::move(p));
  }
  return m;
}

namespace {

// The scratch's q / d / bsum grown for the conversion of n values in blocks of `block` (1: 16-bit values).
Status GrowActs(Context& ctx, ActScratch& s, uint64_t n, uint32_t block) {
  REWIND_RETURN_IF_ERROR(Grow(ctx, s.q, block > 1 ? n : 2 * n));
  REWIND_RETURN_IF_ERROR(Grow(ctx, s.d, 4 * (n / block + 1)));
  return Grow(ctx, s.bsum, 4 * (n / 16 + 1));
}

// Activation rows [n_tok][K] of x converted to what weight type `type` dots against (quant_act.comp); *a and
// *a_off say where the matmul reads them (F32: x itself). `up` (not null): the rows are silu(x)·up, computed by
// the conversion (F32 weights, which read x in place: written into x first).
Status QuantiseActs(Context& ctx, gguf::TensorType type, uint64_t K, const Buffer& x, uint32_t x_off, int64_t n_tok,
                    ActScratch& s, bool reuse, const Buffer** a, uint32_t* a_off, const Buffer* up = nullptr) {
  const uint64_t n = K * static_cast<uint64_t>(n_tok);
  uint32_t block = 1;
  const char* act = ActShader(type, &block);
  // A call that does not promise reuse forgets what the scratch holds: x may have changed since, and a call that
  // reads x in place (F32) would otherwise leave an older conversion of the same buffer standing for the next.
  if (!reuse || up != nullptr) s.held_acts = {};
  *a = &x;
  *a_off = x_off;
  if (act == nullptr) {
    if (up != nullptr)
      REWIND_RETURN_IF_ERROR(RecordEltwise(ctx, x, *up, 1, 1, static_cast<uint32_t>(n), x_off, 0, x_off, 0));
    // F32 weights read x in place; the scratch buffers still need to exist for the bindings.
    REWIND_RETURN_IF_ERROR(Grow(ctx, s.d, 16));
    return Grow(ctx, s.bsum, 16);
  }
  const ActScratch::HeldActs want{x.handle(), x_off, n_tok, K, act};
  const ActScratch::HeldActs& h = s.held_acts;
  *a = &s.q;
  *a_off = 0;
  if (reuse && up == nullptr && h.x == want.x && h.x_off == want.x_off && h.n_tok == want.n_tok && h.K == want.K &&
      h.shader == want.shader)
    return Status::Ok();
  s.held_acts = {};  // until the quantisation below is recorded
  REWIND_RETURN_IF_ERROR(GrowActs(ctx, s, n, block));
  REWIND_ASSIGN_OR_RETURN(Pipeline * qp, ctx.GetPipeline(act));
  struct { uint32_t n_blocks, x_offset, swiglu; } qpc{static_cast<uint32_t>(n / block), x_off, up != nullptr ? 1u : 0u};
  ctx.Dispatch(*qp, {{&x}, {&s.q}, {&s.d}, {&s.bsum}, {up != nullptr ? up : &x}}, &qpc, sizeof(qpc),
               Groups(qpc.n_blocks));
  if (up == nullptr) s.held_acts = want;  // (SwiGLU rows are not x's: nothing to reuse)
  return Status::Ok();
}

// matmul.comp's push constants.
struct MatMulPush {
  uint32_t M, K, N, row_bytes, y_stride, y_offset, a_offset, a_div, e_stride, r_off, e_lo, e_hi, r_base;
};

// The most experts moe_group.comp groups (its shared arrays).
constexpr int64_t kMoeGroupMaxExperts = 1024;

// Tokens per workgroup of the tile variant (matmul.comp's TN / TNF): 8 for K-quants, else 16.
uint32_t TileTokens(gguf::TensorType type) { return gguf::GetTypeInfo(type)->block_size == 256 ? 8u : 16u; }

// kAuto's choice. The rows variant exists for a GPU's coalesced loads: on a CPU device (lavapipe) its barriers
// cost more than they save (tiny-qwen35-q4_k_m tg16: 19.6 tok/s against 53.6 per element), so decode stays per
// element there; the quantised tile is faster on both (pp512: 207 against 105 on lavapipe), the float tile
// only on a GPU (below).
// F32 / F16 / BF16 have no rows variant (their sums are one serial order); on a GPU their decode runs the tile,
// whose staged loads are coalesced where one invocation per row reads a row alone.
// REWIND_GPU_MATMUL=element|rows|tile forces a variant for measurements (unset: kAuto; anything else: an
// error at the first matmul).
MatMulKernel EnvKernel() {
  static const MatMulKernel k = [] {
    const char* v = std::getenv("REWIND_GPU_MATMUL");
    if (v == nullptr || *v == 0) return MatMulKernel::kAuto;
    const std::string s(v);
    if (s == "element") return MatMulKernel::kPerElement;
    if (s == "rows") return MatMulKernel::kRows;
    if (s == "tile") return MatMulKernel::kTile;
    REWIND_CHECK_MSG(false, "REWIND_GPU_MATMUL=%s: use element, rows or tile", v);
    return MatMulKernel::kAuto;
  }();
  return k;
}

MatMulKernel PickKernel(const Context& ctx, gguf::TensorType type, int64_t n_tok, MatMulKernel forced) {
  const bool floats = gguf::GetTypeInfo(type)->block_size == 1;
  if (forced == MatMulKernel::kAuto) forced = EnvKernel();
  if (forced != MatMulKernel::kAuto) return floats && forced == MatMulKernel::kRows ? MatMulKernel::kPerElement : forced;
  // On a CPU device the float tile measured slower than per element (tiny-qwen35-f32 pp512 on lavapipe: 32-38
  // against 47 tok/s): its staging and barriers cost more than the re-reads they save from the host's caches.
  if (ctx.runs_on_cpu() && (floats || n_tok < kMatMulTileMinTokens)) return MatMulKernel::kPerElement;
  if (n_tok >= kMatMulTileMinTokens) return MatMulKernel::kTile;
  return floats ? MatMulKernel::kTile : MatMulKernel::kRows;
}

// REWIND_GPU_INT_DOT=0|1 (unset: kAuto; anything else: an error at the first matmul).
IntDot EnvIntDot() {
  static const IntDot d = [] {
    const char* v = std::getenv("REWIND_GPU_INT_DOT");
    if (v == nullptr || *v == 0) return IntDot::kAuto;
    const std::string s(v);
    if (s == "0") return IntDot::kOff;
    if (s == "1") return IntDot::kOn;
    REWIND_CHECK_MSG(false, "REWIND_GPU_INT_DOT=%s: use 0 or 1", v);
    return IntDot::kAuto;
  }();
  return d;
}

// "_dot" when the kernel `name` (a rows or tile variant) runs with the packed dot product (ops.h IntDot).
Expected<std::string> DotSuffix(const Context& ctx, gguf::TensorType type, IntDot want, MatMulKernel kernel) {
  using TT = gguf::TensorType;
  // The 32-value block types: rows and tile variants; the K-quants: the tile (matmul.comp's KDOT).
  const bool has_variant = type == TT::kQ8_0 || type == TT::kQ4_0 || type == TT::kQ4_1 || type == TT::kQ5_0 ||
                           type == TT::kQ5_1 ||
                           ((type == TT::kQ4_K || type == TT::kQ5_K || type == TT::kQ6_K) && kernel == MatMulKernel::kTile);
  if (want == IntDot::kAuto) want = EnvIntDot();
  if (want == IntDot::kOn && !ctx.has_int_dot())
    return Error::Unsupported("the integer dot product was asked for (REWIND_GPU_INT_DOT=1) but " + ctx.info().name +
                              " lacks VK_KHR_shader_integer_dot_product");
  const bool on = want == IntDot::kAuto ? ctx.int_dot_accelerated() : want == IntDot::kOn;
  return std::string(on && has_variant ? "_dot" : "");
}

}  // namespace

namespace {

Status MatMulOf(Context& ctx, const GpuMatrix& w, const Buffer& x, uint32_t x_off, int64_t n_tok, Buffer& y,
                uint32_t y_off, uint32_t y_stride, ActScratch& s, MatMulReuse reuse, const Buffer* up) {
  if (n_tok <= 0) return Status::Ok();
  const Buffer* a = nullptr;
  uint32_t a_off = 0;
  REWIND_RETURN_IF_ERROR(
      QuantiseActs(ctx, w.type, static_cast<uint64_t>(w.n_cols), x, x_off, n_tok, s, reuse.acts, &a, &a_off, up));
  const MatMulKernel kernel = PickKernel(ctx, w.type, n_tok, s.kernel);
  std::string name = MatMulShader(w.type);
  uint32_t rows_per_group = 64, groups_y = static_cast<uint32_t>(n_tok);
  if (kernel == MatMulKernel::kRows) {
    name += "_rows";
    rows_per_group = 4;
  } else if (kernel == MatMulKernel::kTile) {
    name += "_tile";
    groups_y = Groups(static_cast<uint64_t>(n_tok), TileTokens(w.type));
  }
  if (kernel == MatMulKernel::kRows || kernel == MatMulKernel::kTile) {
    REWIND_ASSIGN_OR_RETURN(std::string dot, DotSuffix(ctx, w.type, s.int_dot, kernel));
    name += dot;
  }
  REWIND_ASSIGN_OR_RETURN(Pipeline * mp, ctx.GetPipeline(name));
  // A workgroup count in x is bounded by the device (65,535 on many): longer row ranges run in dispatches of
  // at most that many groups, from row r_base on (x is not folded: the variants index rows by workgroup).
  const uint64_t max_rows = static_cast<uint64_t>(ctx.max_groups()[0]) * rows_per_group;
  for (const GpuMatrixPart& part : w.parts) {  // rows [row0, row0 + rows) of y from each part
    for (uint64_t r_base = 0; r_base < static_cast<uint64_t>(part.rows); r_base += max_rows) {
      const uint64_t n_rows = std::min<uint64_t>(max_rows, static_cast<uint64_t>(part.rows) - r_base);
      const MatMulPush pc{static_cast<uint32_t>(part.rows), static_cast<uint32_t>(w.n_cols),
                          static_cast<uint32_t>(n_tok), static_cast<uint32_t>(w.row_bytes), y_stride,
                          y_off + static_cast<uint32_t>(part.row0), a_off, 1, 0, 0, 0, 0,
                          static_cast<uint32_t>(r_base)};
      ctx.Dispatch(*mp, {{&part.data}, {a}, {&s.d}, {&s.bsum}, {&y}}, &pc, sizeof(pc), Groups(n_rows, rows_per_group),
                   groups_y);
    }
  }
  return Status::Ok();
}

}  // namespace

Status RecordMatMul(Context& ctx, const GpuMatrix& w, const Buffer& x, uint32_t x_off, int64_t n_tok, Buffer& y,
                    uint32_t y_off, uint32_t y_stride, ActScratch& s, MatMulReuse reuse) {
  return MatMulOf(ctx, w, x, x_off, n_tok, y, y_off, y_stride, s, reuse, nullptr);
}

Status RecordSwiGluMatMul(Context& ctx, const GpuMatrix& w, Buffer& g, const Buffer& u, int64_t n_tok, Buffer& y,
                          uint32_t y_off, uint32_t y_stride, ActScratch& s) {
  return MatMulOf(ctx, w, g, 0, n_tok, y, y_off, y_stride, s, {}, &u);
}

namespace {

Status MatMulIdOf(Context& ctx, const GpuMatrix& w, const ExpertRows& er, const Buffer& ids, const Buffer& x,
                  int64_t n_x, uint32_t a_div, int64_t n_out, Buffer& y, ActScratch& s, MatMulReuse reuse,
                  const Buffer* up) {
  if (n_out <= 0) return Status::Ok();
  REWIND_CHECK(a_div >= 1 && (n_out + a_div - 1) / a_div <= n_x && er.r_off + er.rows <= er.e_stride);
  const Buffer* a = nullptr;
  uint32_t a_off = 0;
  REWIND_RETURN_IF_ERROR(
      QuantiseActs(ctx, w.type, static_cast<uint64_t>(w.n_cols), x, 0, n_x, s, reuse.acts, &a, &a_off, up));
  // The quantised experts have a tile over the rows grouped by expert (prefill: each weight block read once for
  // a tile's rows of one expert) and a rows variant (a GPU's coalesced loads; on a CPU device per element, as
  // the dense decode).
  const bool quantised = gguf::GetTypeInfo(w.type)->block_size > 1;
  const int64_t n_expert = w.n_rows / er.e_stride;
  const MatMulKernel want = s.kernel == MatMulKernel::kAuto ? EnvKernel() : s.kernel;
  if (want == MatMulKernel::kTile && quantised && n_expert > kMoeGroupMaxExperts)
    return Error::Unsupported("the experts' tile groups at most " + std::to_string(kMoeGroupMaxExperts) +
                              " experts, not " + std::to_string(n_expert));
  MatMulKernel kernel = MatMulKernel::kPerElement;
  if (quantised && (want == MatMulKernel::kTile ||
                    (want == MatMulKernel::kAuto && n_expert <= kMoeGroupMaxExperts &&
                     n_out >= kMoeTileMinRowsPerExpert * n_expert))) {
    kernel = MatMulKernel::kTile;
  } else if (quantised && (want == MatMulKernel::kRows || (want == MatMulKernel::kAuto && !ctx.runs_on_cpu()))) {
    kernel = MatMulKernel::kRows;
  }
  const uint32_t rows_per_group = kernel == MatMulKernel::kRows ? 4 : 64;
  REWIND_CHECK_MSG(Groups(static_cast<uint64_t>(er.rows), rows_per_group) <= ctx.max_groups()[0],
                   "an expert of %lld rows is over the device's workgroup count", static_cast<long long>(er.rows));
  std::string name = std::string(MatMulShader(w.type)) + (kernel == MatMulKernel::kRows   ? "_id_rows"
                                                          : kernel == MatMulKernel::kTile ? "_id_tile"
                                                                                          : "_id");
  if (kernel != MatMulKernel::kPerElement) {
    REWIND_ASSIGN_OR_RETURN(std::string dot, DotSuffix(ctx, w.type, s.int_dot, kernel));
    name += dot;
  }
  REWIND_ASSIGN_OR_RETURN(Pipeline * mp, ctx.GetPipeline(name));
  uint32_t groups_y = static_cast<uint32_t>(n_out);
  if (!reuse.order) s.held_order = {};  // as for the activations: ids may have changed since
  if (kernel == MatMulKernel::kTile) {  // the rows grouped by expert, each run padded to 16 (moe_group.comp)
    const uint64_t bytes = MoeOrderBytes(n_out, n_expert);
    const ActScratch::HeldOrder want{ids.handle(), n_out, n_expert};
    const ActScratch::HeldOrder& h = s.held_order;
    if (!(reuse.order && h.ids == want.ids && h.n_out == want.n_out && h.n_expert == want.n_expert)) {
      s.held_order = {};
      if (!s.moe_order.valid() || s.moe_order.size() < bytes) {
        REWIND_RETURN_IF_ERROR(ctx.Submit());  // recorded work may still read the old buffer
        REWIND_ASSIGN_OR_RETURN(s.moe_order, ctx.Alloc(bytes));
      }
      REWIND_RETURN_IF_ERROR(ctx.Fill(s.moe_order, 0xFFFFFFFFu, 0, bytes));
      REWIND_ASSIGN_OR_RETURN(Pipeline * gp, ctx.GetPipeline("moe_group"));
      struct { uint32_t N, X; } gpc{static_cast<uint32_t>(n_out), static_cast<uint32_t>(n_expert)};
      ctx.Dispatch(*gp, {{&ids}, {&s.moe_order}}, &gpc, sizeof(gpc), 1);
      s.held_order = want;
    }
    groups_y = static_cast<uint32_t>(bytes / 4 / TileTokens(w.type));
  }
  for (const GpuMatrixPart& part : w.parts) {  // the rows routed to the experts [e_lo, e_hi) held by each part
    REWIND_CHECK(part.row0 % er.e_stride == 0 && part.rows % er.e_stride == 0);
    const MatMulPush pc{static_cast<uint32_t>(er.rows), static_cast<uint32_t>(w.n_cols), static_cast<uint32_t>(n_out),
                        static_cast<uint32_t>(w.row_bytes), static_cast<uint32_t>(er.rows), 0, a_off, a_div,
                        static_cast<uint32_t>(er.e_stride), static_cast<uint32_t>(er.r_off),
                        static_cast<uint32_t>(part.row0 / er.e_stride),
                        static_cast<uint32_t>((part.row0 + part.rows) / er.e_stride), 0};
    ctx.Dispatch(*mp, {{&part.data}, {a}, {&s.d}, {&s.bsum}, {&y}, {&ids}, {kernel == MatMulKernel::kTile ? &s.moe_order : &ids}},
                 &pc, sizeof(pc), Groups(pc.M, rows_per_group), groups_y);
  }
  return Status::Ok();
}

}  // namespace

Status RecordMatMulId(Context& ctx, const GpuMatrix& w, const ExpertRows& er, const Buffer& ids, const Buffer& x,
                      int64_t n_x, uint32_t a_div, int64_t n_out, Buffer& y, ActScratch& s, MatMulReuse reuse) {
  return MatMulIdOf(ctx, w, er, ids, x, n_x, a_div, n_out, y, s, reuse, nullptr);
}

Status RecordSwiGluMatMulId(Context& ctx, const GpuMatrix& w, const ExpertRows& er, const Buffer& ids, Buffer& g,
                            const Buffer& u, int64_t n_x, uint32_t a_div, int64_t n_out, Buffer& y, ActScratch& s,
                            MatMulReuse reuse) {
  return MatMulIdOf(ctx, w, er, ids, g, n_x, a_div, n_out, y, s, {false, reuse.order}, &u);
}

uint64_t MoeOrderBytes(int64_t n_out, int64_t n_expert) {
  const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(n_out, 0));
  return 4 * ((n + 15 * std::min<uint64_t>(n, static_cast<uint64_t>(std::max<int64_t>(n_expert, 0))) + 15) / 16 * 16);
}

Status RecordMoeRoute(Context& ctx, Buffer& logits, uint32_t n_tok, uint32_t n_expert, uint32_t k, Buffer& sel,
                      Buffer& wt) {
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("moe_route"));
  struct { uint32_t N, X, K; } pc{n_tok, n_expert, k};
  ctx.Dispatch(*p, {{&logits}, {&sel}, {&wt}}, &pc, sizeof(pc), Groups(n_tok));
  return Status::Ok();
}

Status RecordMoeCombine(Context& ctx, const Buffer& ye, const Buffer& wt, uint32_t n_tok, uint32_t k, uint32_t n_embd,
                        const Buffer* shared, const Buffer* shared_gate, Buffer& out) {
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("moe_combine"));
  const uint32_t mode = shared == nullptr ? 0u : shared_gate == nullptr ? 1u : 2u;
  struct { uint32_t N, K, E, shared; } pc{n_tok, k, n_embd, mode};
  const Buffer* sh = shared != nullptr ? shared : &ye;
  const Buffer* sg = shared_gate != nullptr ? shared_gate : &wt;
  ctx.Dispatch(*p, {{&ye}, {&wt}, {sh}, {sg}, {&out}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(n_tok) * n_embd));
  return Status::Ok();
}

Status RecordEltwise(Context& ctx, const Buffer& a, const Buffer& b, uint32_t mode, uint32_t rows, uint32_t width,
                     uint32_t a_off, uint32_t a_stride, uint32_t b_off, uint32_t b_stride) {
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("eltwise"));
  struct { uint32_t rows, width, a_off, a_stride, b_off, b_stride, mode; } pc{rows, width, a_off, a_stride, b_off,
                                                                             b_stride, mode};
  ctx.Dispatch(*p, {{&a}, {&b}}, &pc, sizeof(pc), Groups(static_cast<uint64_t>(rows) * width));
  return Status::Ok();
}

Status RecordRmsNorm(Context& ctx, Buffer& x, uint32_t x_off, uint32_t stride, uint32_t rows, uint32_t n,
                     const Buffer* w, float eps, Buffer& o, uint32_t o_off, uint32_t o_stride, const Buffer* add,
                     const Buffer* gate) {
  const bool wide = n >= kRmsWideMinN;
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline(wide ? "rms_norm_wide" : "rms_norm"));
  struct { uint32_t rows, n, stride, x_offset, o_offset, o_stride, w_flag; float eps; uint32_t add_flag, gate_flag; } pc{
      rows, n, stride, x_off, o_off, o_stride, w != nullptr ? 1u : 0u, eps, add != nullptr ? 1u : 0u,
      gate != nullptr ? 1u : 0u};
  ctx.Dispatch(*p, {{&x}, {w != nullptr ? w : &x}, {&o}, {add != nullptr ? add : &x}, {gate != nullptr ? gate : &x}},
               &pc, sizeof(pc), wide ? rows : Groups(rows));
  return Status::Ok();
}

Status RecordRmsNormForMatMul(Context& ctx, Buffer& x, uint32_t rows, uint32_t n, const Buffer& w, float eps, Buffer& o,
                              const Buffer* add, gguf::TensorType next, ActScratch& s, const Buffer* gate,
                              int64_t n_tok) {
  s.held_acts = {};  // o changes
  if (n_tok <= 0) n_tok = rows;
  const uint64_t count = static_cast<uint64_t>(n) * rows;
  uint32_t block = 1;
  const char* act = ActShader(next, &block);
  if (act == nullptr || n % block != 0 || count % static_cast<uint64_t>(n_tok) != 0)
    return RecordRmsNorm(ctx, x, 0, n, rows, n, &w, eps, o, 0, n, add, gate);
  REWIND_RETURN_IF_ERROR(GrowActs(ctx, s, count, block));
  const bool wide = n >= kRmsWideMinN;
  const std::string name = std::string(wide ? "rms_norm_wide_" : "rms_norm_") + (act + std::strlen("quant_"));
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline(name));
  struct { uint32_t rows, n, stride, x_offset, o_offset, o_stride, w_flag; float eps; uint32_t add_flag, gate_flag; } pc{
      rows, n, n, 0, 0, n, 1u, eps, add != nullptr ? 1u : 0u, gate != nullptr ? 1u : 0u};
  ctx.Dispatch(*p, {{&x}, {&w}, {&o}, {add != nullptr ? add : &x}, {gate != nullptr ? gate : &x}, {&s.q}, {&s.d},
                    {&s.bsum}},
               &pc, sizeof(pc), wide ? rows : Groups(rows));
  s.held_acts = {o.handle(), 0, n_tok, count / static_cast<uint64_t>(n_tok), act};
  return Status::Ok();
}

Status RecordTopLogits(Context& ctx, const Buffer& logits, uint32_t rows, uint32_t n, uint32_t k,
                       TopLogitsScratch& scratch, const Buffer** result) {
  constexpr uint32_t kBlock = 1024;
  REWIND_CHECK_MSG(k >= 1 && k <= n && k <= 128, "top-k of %u with k = %u", n, k);
  REWIND_ASSIGN_OR_RETURN(Pipeline * p, ctx.GetPipeline("top_logits"));
  const Buffer* in = &logits;
  uint32_t n_in = n, pairs = 0;
  bool to_a = true;
  while (true) {
    const uint32_t n_blocks = (n_in + kBlock - 1) / kBlock;
    Buffer& out = to_a ? scratch.a : scratch.b;
    const size_t bytes = 8ull * rows * n_blocks * k;
    if (!out.valid() || out.size() < bytes) {
      REWIND_RETURN_IF_ERROR(ctx.Submit());  // recorded passes may still read the old buffer
      REWIND_ASSIGN_OR_RETURN(out, ctx.Alloc(std::max<size_t>(bytes, 16)));
    }
    struct { uint32_t rows, n_in, n_blocks, k, pairs; } pc{rows, n_in, n_blocks, k, pairs};
    ctx.Dispatch(*p, {{in}, {&out}}, &pc, sizeof(pc), rows * n_blocks);
    if (n_blocks == 1) {
      *result = &out;
      return Status::Ok();
    }
    in = &out;
    n_in = n_blocks * k;
    pairs = 1;
    to_a = !to_a;
  }
}

Expected<std::vector<float>> MatMulHost(Context& ctx, const GpuMatrix& w, const float* x, int64_t n_tok,
                                        MatMulKernel kernel, IntDot int_dot) {
  const size_t nx = static_cast<size_t>(w.n_cols * n_tok), ny = static_cast<size_t>(w.n_rows * n_tok);
  REWIND_ASSIGN_OR_RETURN(Buffer xb, ctx.Alloc(4 * nx));
  REWIND_ASSIGN_OR_RETURN(Buffer yb, ctx.Alloc(4 * ny));
  REWIND_RETURN_IF_ERROR(ctx.Upload(xb, x, 4 * nx));
  ActScratch s;
  s.kernel = kernel;
  s.int_dot = int_dot;
  REWIND_RETURN_IF_ERROR(RecordMatMul(ctx, w, xb, 0, n_tok, yb, 0, static_cast<uint32_t>(w.n_rows), s));
  std::vector<float> y(ny);
  REWIND_RETURN_IF_ERROR(ctx.Download(yb, y.data(), 4 * ny));
  return y;
}

}  // namespace rw::gpu
