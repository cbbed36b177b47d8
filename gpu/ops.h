// GPU kernels over device buffers, recorded into the context's command stream (gpu/vk_context.h), each the twin
// of a CPU kernel with the arithmetic of its scalar reference (docs/gpu.md "Exactness"). Record* functions only
// record; Context::Submit runs them. Shapes are checked; a violation is a programming error and aborts.
#pragma once

#include <cstdint>
#include <vector>

#include "base/expected.h"
#include "gguf/types.h"
#include "gpu/vk_context.h"

namespace rw::gpu {

// A weight matrix in its GGUF block format on the device: n_rows rows of n_cols elements, row_bytes apart, in
// one buffer, or in several of consecutive whole row groups when it is larger than the device's storage buffer
// range (lavapipe: 128 MiB, less than a real vocabulary's LM head); each part is multiplied by its own dispatch
// with the same per-element arithmetic.
struct GpuMatrixPart {
  Buffer data;
  int64_t row0 = 0;  // first row of the matrix in this part
  int64_t rows = 0;
};
struct GpuMatrix {
  gguf::TensorType type = gguf::TensorType::kF32;
  std::vector<GpuMatrixPart> parts;
  int64_t n_cols = 0;
  int64_t n_rows = 0;
  uint64_t row_bytes = 0;
  bool valid() const { return !parts.empty(); }
};

// Weight types the GPU matmul handles: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
bool GpuMatMulSupports(gguf::TensorType type);

// Uploads a weight as it is in the GGUF file. Unsupported types: an error naming the type. A matrix over the
// device's buffer range is split into parts of whole groups of row_group rows (an expert's rows of a stacked
// expert tensor stay in one part).
Expected<GpuMatrix> UploadMatrix(Context& ctx, gguf::TensorType type, const uint8_t* data, int64_t n_cols,
                                 int64_t n_rows, uint64_t row_bytes, int64_t row_group = 1);

// The matmul's kernel variants (matmul.comp): one arithmetic per output element in all of them, so the choice
// changes no bit (I1), only the speed. kAuto on a CPU device (lavapipe): kPerElement, but kTile for the quantised
// types from kMatMulTileMinTokens tokens (prefill). On a GPU: kTile from kMatMulTileMinTokens tokens; for fewer
// (decode, short verify batches) kRows for the quantised types, kTile for F32 / F16 / BF16 (their double sums
// run in value order, so a row cannot be split). REWIND_GPU_MATMUL=element|rows|tile forces one (measurements).
// F32 / F16 / BF16 have no kRows (forcing it runs kPerElement). The MoE experts (RecordMatMulId): F32 / F16 / BF16
// per element; the quantised types kTile over the rows grouped by expert where an expert has on average
// kMoeTileMinRowsPerExpert rows (prefill), else kRows on a GPU and kPerElement on a CPU device.
enum class MatMulKernel {
  kAuto,
  kPerElement,  // one invocation per output element
  kRows,        // a workgroup per 4 rows of one token, the row's blocks read side by side
  kTile,        // a workgroup per 64 rows x 8 or 16 tokens, weight and activation blocks staged in shared memory
};
inline constexpr int64_t kMatMulTileMinTokens = 4;
inline constexpr int64_t kMoeTileMinRowsPerExpert = 4;

// The packed int8 dot product (VK_KHR_shader_integer_dot_product) in the rows and tile kernels of the 32-value
// block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; the `_dot` shaders): the same exact integer block sums, so the same
// bits. kAuto: on where the device says the instruction is accelerated (Context::int_dot_accelerated; not on
// lavapipe, which emulates it). REWIND_GPU_INT_DOT=0|1 forces it (measurements); kOn on a device without the
// extension is an error.
enum class IntDot { kAuto, kOff, kOn };

// Activation rows quantised for a matmul (quant_act.comp); grown on demand, reused across calls.
struct ActScratch {
  Buffer q;     // int8 (Q8_0/Q8_K) or 16-bit (F16/BF16) values
  Buffer d;     // a float scale per block
  Buffer bsum;  // Q8_K: an int sum per 16 values
  Buffer moe_order;  // the expert tile's rows grouped by expert (MoeOrderBytes)
  MatMulKernel kernel = MatMulKernel::kAuto;  // tests force a variant (all give the same bits)
  IntDot int_dot = IntDot::kAuto;
  // What q / d / bsum hold (the rows the last quantisation read) and the rows moe_order holds grouped: what a
  // MatMulReuse may skip recomputing.
  struct HeldActs {
    VkBuffer x = VK_NULL_HANDLE;
    uint32_t x_off = 0;
    int64_t n_tok = 0;
    uint64_t K = 0;
    const char* shader = nullptr;
  } held_acts;
  struct HeldOrder {
    VkBuffer ids = VK_NULL_HANDLE;
    int64_t n_out = 0, n_expert = 0;
  } held_order;
};

// The caller's word that an input is unchanged since the previous matmul on this scratch read it (nothing wrote
// it in between): `acts`, the activation rows x; `order`, the expert ids (RecordMatMulId). Where the scratch
// still holds what was made from those same rows (same buffer, offset and shape), the matmul reuses it instead
// of quantising again (or grouping again): the same bytes, so the same bits, and one dispatch less. Layers
// whose projections share an input (q / k / v, the GDN projections, gate and up) quantise it once.
struct MatMulReuse {
  bool acts = false;
  bool order = false;
};

// y[t·y_stride + y_off + r] = W[r]·x[x_off + t·K ..] for t < n_tok, r < W.n_rows (K = W.n_cols). One dispatch to
// quantise the activation rows (same bytes as gguf::QuantizeActivationRow), one for the dot products.
Status RecordMatMul(Context& ctx, const GpuMatrix& w, const Buffer& x, uint32_t x_off, int64_t n_tok, Buffer& y,
                    uint32_t y_off, uint32_t y_stride, ActScratch& scratch, MatMulReuse reuse = {});

// Element-wise ops (eltwise.comp) over `rows` rows of `width` values: a[a_off + r·a_stride + c] op=
// b[b_off + r·b_stride + c]; the modes are the shader's: 0 a += b, 1 a = silu(a)·b, 2 a = a·silu(b),
// 3 a = a·sigmoid(b), 4 a = f16(a).
Status RecordEltwise(Context& ctx, const Buffer& a, const Buffer& b, uint32_t mode, uint32_t rows, uint32_t width,
                     uint32_t a_off = 0, uint32_t a_stride = 0, uint32_t b_off = 0, uint32_t b_stride = 0);

// RecordMatMul of the SwiGLU rows silu(g)·u (g, u [n_tok][K]): computed by the activations' conversion, not
// stored (one dispatch less than an element-wise SwiGLU first: the same float values, so the same bits). F32
// weights read their input in place: g is overwritten with silu(g)·u first.
Status RecordSwiGluMatMul(Context& ctx, const GpuMatrix& w, Buffer& g, const Buffer& u, int64_t n_tok, Buffer& y,
                          uint32_t y_off, uint32_t y_stride, ActScratch& scratch);

// Which rows of a stacked expert tensor (qwen35moe / qwen3next ffn_*_exps, n_expert·e_stride rows) make one
// expert's matrix: rows [e·e_stride + r_off, e·e_stride + r_off + rows) for expert e (r_off: the up half of a
// fused gate_up tensor).
struct ExpertRows {
  int64_t rows = 0;
  int64_t e_stride = 0;
  int64_t r_off = 0;
};

// The MoE experts' product (matmul.comp with MAT_ID): y[t·er.rows + r] = W_{ids[t]}[r]·x[t / a_div] for t < n_out,
// r < er.rows, x [n_x][w.n_cols]; ids [n_out] int32 expert numbers on the device (the tile groups the rows by
// expert first, moe_group.comp, into scratch.moe_order). Each element is the dense matmul's arithmetic (same activation bytes, same integer block sums, same float order): the bits of
// RecordMatMul on that expert's rows, whatever the other rows of the batch route to.
Status RecordMatMulId(Context& ctx, const GpuMatrix& w, const ExpertRows& er, const Buffer& ids, const Buffer& x,
                      int64_t n_x, uint32_t a_div, int64_t n_out, Buffer& y, ActScratch& scratch,
                      MatMulReuse reuse = {});

// RecordMatMulId of the SwiGLU rows silu(g)·u (g, u [n_x][w.n_cols]), computed by the activations' conversion
// (RecordSwiGluMatMul's rule; F32 weights: g is overwritten with them first). reuse.acts does not apply.
Status RecordSwiGluMatMulId(Context& ctx, const GpuMatrix& w, const ExpertRows& er, const Buffer& ids, Buffer& g,
                            const Buffer& u, int64_t n_x, uint32_t a_div, int64_t n_out, Buffer& y,
                            ActScratch& scratch, MatMulReuse reuse = {});

// The bytes of the grouped order the experts' tile kernel needs for n_out rows over n_expert experts (each
// expert's run padded to 16 rows).
uint64_t MoeOrderBytes(int64_t n_out, int64_t n_expert);

// The softmax router (moe_route.comp, kernels::SoftmaxTopK): logits [n_tok][n_expert] become probabilities;
// sel [n_tok][k] int32 and wt [n_tok][k] receive the top k experts and their renormalised weights.
Status RecordMoeRoute(Context& ctx, Buffer& logits, uint32_t n_tok, uint32_t n_expert, uint32_t k, Buffer& sel,
                      Buffer& wt);

// out [n_tok][n_embd] = Σ_k wt[t][k]·ye[t][k] in k order, + shared (when not null) times sigmoid(shared_gate[t])
// (when not null) (moe_combine.comp).
Status RecordMoeCombine(Context& ctx, const Buffer& ye, const Buffer& wt, uint32_t n_tok, uint32_t k, uint32_t n_embd,
                        const Buffer* shared, const Buffer* shared_gate, Buffer& out);

// RMSNorm of `rows` rows of n floats: row r at x[x_off + r·stride] -> o[o_off + r·o_stride], times w (n floats)
// when w is not null (kernels::RmsNorm). Rows shorter than kRmsWideMinN (per-head norms): one invocation per
// row, Σx² in element order (the CPU's bits). Longer rows (the hidden size): a workgroup per row, Σx² as 64
// strided partials added in a fixed tree (rms_norm.comp; the CPU's within rounding). The choice depends on n
// alone, never on the batch.
inline constexpr uint32_t kRmsWideMinN = 512;
// `add` (not null): first x += add element by element (add laid out as x; the residual add, the same float add
// as a separate element-wise dispatch), stored in x, and the norm is of the sums: one dispatch for two.
// `gate` (not null): each output times silu(gate) (gate laid out as o; the GDN layer's gated norm, the same
// arithmetic as a separate element-wise dispatch): one dispatch for two.
Status RecordRmsNorm(Context& ctx, Buffer& x, uint32_t x_off, uint32_t stride, uint32_t rows, uint32_t n,
                     const Buffer* w, float eps, Buffer& o, uint32_t o_off, uint32_t o_stride,
                     const Buffer* add = nullptr, const Buffer* gate = nullptr);

// RecordRmsNorm of `rows` contiguous rows of n values (x, o [rows][n], weight w; `add` and `gate` as above) for
// a matmul with weights of type `next` that reads o next as n_tok token rows (0: rows; a token's heads side by
// side: rows = n_tok · heads): the same dispatch also converts the output rows as that matmul's activation
// conversion would (the same bytes: rms_norm.comp's RMS_QUANT), and `scratch` records them, so the matmul
// called with MatMulReuse{acts = true} skips its conversion. Types that read o in place (F32), and rows that are
// not whole blocks of the conversion, get the plain norm. The scratch forgets what it held either way.
Status RecordRmsNormForMatMul(Context& ctx, Buffer& x, uint32_t rows, uint32_t n, const Buffer& w, float eps, Buffer& o,
                              const Buffer* add, gguf::TensorType next, ActScratch& scratch,
                              const Buffer* gate = nullptr, int64_t n_tok = 0);

// Top-K selection of logits rows (top_logits.comp, kernels::TopLogits): logits [rows][n] floats -> the best k
// (1 <= k <= min(n, 128)) (logit, id) pairs of each row, descending logit, ties to the lower id, NaN as -inf,
// values with their bits. Passes of 1,024-entry blocks per row until one block is left; `scratch` holds the
// passes' pairs (grown on demand) and *result points at the buffer with the [rows][k] pairs (8 bytes each).
struct TopLogitsScratch {
  Buffer a, b;
};
Status RecordTopLogits(Context& ctx, const Buffer& logits, uint32_t rows, uint32_t n, uint32_t k,
                       TopLogitsScratch& scratch, const Buffer** result);

// Host convenience for tests and tools: uploads x [n_tok][K], runs RecordMatMul, returns y [n_tok][n_rows].
Expected<std::vector<float>> MatMulHost(Context& ctx, const GpuMatrix& w, const float* x, int64_t n_tok,
                                        MatMulKernel kernel = MatMulKernel::kAuto, IntDot int_dot = IntDot::kAuto);

inline uint32_t Groups(uint64_t n, uint32_t per = 64) { return static_cast<uint32_t>((n + per - 1) / per); }

}  // namespace rw::gpu
