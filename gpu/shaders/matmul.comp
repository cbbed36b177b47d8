#version 450
// y[t][r] = W[r] · a[t]. Every output element has one arithmetic, whatever kernel variant computes it, so its
// bits do not depend on the number of tokens, the row range, the workgroup layout or the variant (I1). The
// arithmetic is gguf::VecDotRef's (llama.cpp's generic C numerics), written so that the compiler can neither
// contract nor reorder it (`precise`): integer block sums (exact in any order), float block partials accumulated
// in block order (K-quants: 8 float lanes, each the partial of every 8th value of a block, summed at the end),
// F32 / F16 / BF16 products rounded to float and summed in double.
// Three variants of the quantised types share the block arithmetic below (BlockP, LaneK, MinK):
// - (default) one invocation per output element: the weight row's blocks in order. MAT_ID (matmul_<type>_id, the
//   MoE experts) uses this one and, for the quantised types, MM_SPLITK (matmul_<type>_id_rows) and MM_TILE over
//   rows grouped by expert (matmul_<type>_id_tile).
// - MM_SPLITK (matmul_<type>_rows, few tokens: decode): a workgroup computes 4 rows of one token; the 16
//   invocations of a row compute the float partials of 16 consecutive blocks (K-quants: 2 blocks x 8 lanes) in
//   parallel, reading the row's bytes side by side, into shared memory; then one invocation adds them to the
//   row's accumulators in block order, the same adds as the default variant.
// - MM_TILE (matmul_<type>_tile, prefill; F32 / F16 / BF16 also decode on a GPU): a workgroup computes 64 rows x
//   TN tokens, one row per invocation and TN accumulators each. (F32 / F16 / BF16: chunks of 32 values staged,
//   each product added to the double sums in value order, below.) Block by block, the tile's 64 weight blocks and TN activation blocks are staged in
//   shared memory with cooperative 16- and 32-bit loads (each weight byte is read from memory once per TN tokens
//   instead of once per token), then each invocation runs the block arithmetic for its row and each token.
// W_<TYPE> picks the weight type; the activation a is in gguf::VecDotType(TYPE) (quant_act.comp).
// MAT_ID (per element, and with MM_SPLITK): output row t multiplies the weight rows of expert ids[t] (rows ids[t]·e_stride + r_off + r of the
// stacked expert tensor) with activation row t / a_div; the element is the dense product's arithmetic.
// Loops of constant trip count are unrolled ([[unroll]]): lavapipe ends an invocation's loops after 65,535
// back-edges (docs/gpu.md "Device limits"), so only the loops over blocks count.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#include "common.glsl"
// MM_DOT (the `_dot` variants of the 32-value block types, rows and tile kernels and the experts' rows): the
// int8 products of 4 values at a time by the packed integer dot product (SPV_KHR_integer_dot_product's OpSDot,
// opcode 4450, PackedVectorFormat4x8Bit; capabilities DotProductInput4x8BitPacked 6018 and DotProduct 6019),
// declared through GL_EXT_spirv_intrinsics since Debian 12's glslang has no GL_EXT_integer_dot_product. The
// block's integer sum is exact either way, so the variants give the same bits. Weights are repacked to signed
// bytes first (Q4_0: q - 8, Q5_0: q - 16, with the high bits of Q5_0 / Q5_1 put back).
#if defined(MM_DOT)
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6018, 6019], id = 4450)
int SDot4(uint a, uint b, spirv_literal int packed_vector_format);
int Dot4(uint a, uint b) { return SDot4(a, b, 0); }
// 4 bytes of 4-bit values q (0..15) -> the bytes of q - 8 as int8 (q ^ 8, then bit 3 copied into bits 4-7).
uint Q4Signed(uint v) { v ^= 0x08080808u; return v | ((v & 0x08080808u) * 0x1Eu); }
// 4 bytes of 5-bit values q (0..31) -> the bytes of q - 16 as int8.
uint Q5Signed(uint v) { v ^= 0x10101010u; return v | ((v & 0x10101010u) * 0x0Fu); }
// 4 bytes of 6-bit values q (0..63) -> the bytes of q - 32 as int8 (q ^ 32, then bit 5 copied into bits 6-7).
uint Q6Signed(uint v) { v ^= 0x20202020u; return v | ((v & 0x20202020u) * 0x6u); }
// 4 bits -> bit 0 of 4 bytes.
uint Spread4(uint h) { return (h * 0x00204081u) & 0x01010101u; }
#endif
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer W { uint8_t w[]; };
layout(std430, binding = 0) readonly buffer W16 { uint16_t w16[]; };  // the same bytes (rows and blocks are even)
layout(std430, binding = 0) readonly buffer W32 { uint w32[]; };      // the same bytes (F32 rows)
#if defined(W_F32)
layout(std430, binding = 1) readonly buffer A { float af[]; };
#elif defined(W_F16) || defined(W_BF16)
layout(std430, binding = 1) readonly buffer A { uint16_t ah[]; };
#else
layout(std430, binding = 1) readonly buffer A { int8_t aq[]; };
layout(std430, binding = 1) readonly buffer A32 { uint aq32[]; };  // the same bytes, 4 at a time (K % 32 == 0)
#endif
layout(std430, binding = 2) readonly buffer AD { float ad[]; };
layout(std430, binding = 3) readonly buffer AS { int abs_[]; };
layout(std430, binding = 4) buffer Y { float y[]; };
#if defined(MAT_ID)
layout(std430, binding = 5) readonly buffer I { int ids[]; };  // [N] expert of each output row
#endif
// rows, cols (K), tokens, weight row bytes, y row stride (floats), y offset (floats), activation offset
// (elements, for F32 activations read in place); MAT_ID: activation rows per output row's divisor, weight rows
// per expert, first weight row of the expert's matrix, and the experts [e_lo, e_hi) this dispatch's weight
// buffer holds (a stacked tensor over the device's buffer range comes in parts; rows of other experts are left
// to the dispatches of their parts); r_base: the first row of this dispatch (rows beyond the workgroup-count
// limit run in further dispatches).
layout(push_constant) uniform P {
  uint M; uint K; uint N; uint row_bytes; uint y_stride; uint y_offset; uint a_offset; uint a_div; uint e_stride; uint r_off;
  uint e_lo; uint e_hi; uint r_base;
} pc;

#if defined(W_Q8_0)
#define BSZ 34u  // weight block bytes
#define QK 32u   // values per block
#define QKN 32
#elif defined(W_Q4_0)
#define BSZ 18u
#define QK 32u
#define QKN 32
#elif defined(W_Q4_1)
#define BSZ 20u
#define QK 32u
#define QKN 32
#define ACT_Q8_1  // the activation is Q8_1: a block's scale d and its f16 term s = d·Σq (in `abs_`, float bits)
#elif defined(W_Q5_0)
#define BSZ 22u
#define QK 32u
#define QKN 32
#elif defined(W_Q5_1)
#define BSZ 24u
#define QK 32u
#define QKN 32
#define ACT_Q8_1
#elif defined(W_Q4_K)
#define BSZ 144u
#define QK 256u
#define QKN 256
#elif defined(W_Q5_K)
#define BSZ 176u
#define QK 256u
#define QKN 256
#elif defined(W_Q6_K)
#define BSZ 210u
#define QK 256u
#define QKN 256
#endif

#if defined(W_F32) || defined(W_F16) || defined(W_BF16)
#define W_FLOAT
#endif

// ---- Where the block arithmetic reads: memory, or the tile staged in shared memory (MM_TILE). -------------
#if defined(MM_TILE) && !defined(W_FLOAT)
#if QKN == 32
#define TN 16u  // tokens per tile
#else
#define TN 8u
#endif
#if defined(MM_DOT) && (defined(W_Q4_K) || defined(W_Q5_K) || defined(W_Q6_K))
// KDOT (matmul_q4_k_tile_dot, matmul_q5_k_tile_dot and their _id_ twins): LaneK's integer lane sums by the packed
// dot product. Lane l of a 32-value sub-block sums the values l, l + 8, l + 16, l + 24 (the 8 float lanes of the
// generic order); the tile stages each token's activations with those four bytes in one word (`sa`, lane-major:
// [TN][8 sub-blocks][8 lanes]), each invocation gathers its row's weights the same way, and one Dot4 gives a
// lane's sum of a sub-block: aux[l] = Σ_j s_j·Σ_k q·a, the same exact integer as LaneK's value by value, so the
// same float steps after it and the same bits. Q6_K's lanes have 2 values of each 16-value group (its own int8
// scale): a word holds a lane's values of two groups, and two Dot4s with the other group's bytes masked off give
// each group's sum.
#define KDOT
#endif
shared uint sw[16u * BSZ];         // [64 rows][BSZ bytes] of block i, little-endian words
shared uint sa[TN * QK / 4u];      // [TN tokens][QK int8] of block i
shared float sd[TN];               // the tokens' activation scales of block i
#if defined(ACT_Q8_1)
shared float ss[TN];               // the tokens' Q8_1 terms s of block i
#endif
#if QKN == 256
shared int sb[TN * 16u];           // [TN tokens][16] Q8_K sums of 16 values
#endif
uint WB(uint o) { return (sw[o >> 2] >> ((o & 3u) << 3)) & 255u; }
uint WH(uint o) { return (sw[o >> 2] >> ((o & 2u) << 3)) & 65535u; }  // o even
// Bytes o + l, o + l + 8, o + l + 16, o + l + 24 of the staged blocks in one word (lane l's values of 32 bytes).
uint Gather8(uint o, uint l) { return WB(o + l) | (WB(o + l + 8u) << 8) | (WB(o + l + 16u) << 16) | (WB(o + l + 24u) << 24); }
uint AW(uint o) { return sa[o >> 2]; }                                // o % 4 == 0
int AQ(uint o) { return bitfieldExtract(int(sa[o >> 2]), int((o & 3u) << 3), 8); }
float AScale(uint i) { return sd[i]; }
#if defined(ACT_Q8_1)
float AS1(uint i) { return ss[i]; }
#endif
#if QKN == 256
int ASum(uint i) { return sb[i]; }
#endif
#else
uint WB(uint o) { return uint(w[o]); }
uint WH(uint o) { return uint(w16[o >> 1]); }
#if !defined(W_F32) && !defined(W_F16) && !defined(W_BF16)
uint AW(uint o) { return aq32[o >> 2]; }
int AQ(uint o) { return int(aq[o]); }
#endif
float AScale(uint i) { return ad[i]; }
int ASum(uint i) { return abs_[i]; }
float AS1(uint i) { return intBitsToFloat(abs_[i]); }
#endif
int I8(uint b) { return bitfieldExtract(int(b), 0, 8); }  // a byte's value as int8
float WF16(uint o) { return F16ToF32(WB(o) | (WB(o + 1u) << 8)); }

// ---- The block arithmetic: blk = the weight block's first byte, a = its activation values' first index,
// ai = its activation block's index (scale; Q8_K: sums at ai·16).
#if QKN == 32
// The block's float partial p (sumf += p in block order).
float BlockP(uint blk, uint a, uint ai) {
  int sumi = 0;
#if defined(W_Q8_0)
  [[unroll]] for (uint j = 0u; j < 32u; j += 4u) {
    const uint q0 = WH(blk + 2u + j), q1 = WH(blk + 4u + j), av = AW(a + j);
#if defined(MM_DOT)
    sumi += Dot4(q0 | (q1 << 16), av);
#else
    sumi += I8(q0) * I8(av) + I8(q0 >> 8) * I8(av >> 8) + I8(q1) * I8(av >> 16) + I8(q1 >> 8) * I8(av >> 24);
#endif
  }
  precise const float dd = WF16(blk) * AScale(ai);
  precise const float p = float(sumi) * dd;
#elif defined(W_Q4_0)
#if defined(MM_DOT)
  [[unroll]] for (uint j = 0u; j < 16u; j += 4u) {
    const uint qw = WH(blk + 2u + j) | (WH(blk + 4u + j) << 16);
    sumi += Dot4(Q4Signed(qw & 0x0F0F0F0Fu), AW(a + j)) + Dot4(Q4Signed((qw >> 4) & 0x0F0F0F0Fu), AW(a + j + 16u));
  }
#else
  [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
    const uint qb = WH(blk + 2u + j);
    sumi += (int(qb & 15u) - 8) * AQ(a + j) + (int((qb >> 4) & 15u) - 8) * AQ(a + j + 16u);
    sumi += (int((qb >> 8) & 15u) - 8) * AQ(a + j + 1u) + (int(qb >> 12) - 8) * AQ(a + j + 17u);
  }
#endif
  precise const float p0 = float(sumi) * WF16(blk);
  precise const float p = p0 * AScale(ai);
#elif defined(W_Q4_1)  // d, m, qs[16]: (d·da)·Σ q·a + m·s
#if defined(MM_DOT)
  [[unroll]] for (uint j = 0u; j < 16u; j += 4u) {
    const uint qw = WH(blk + 4u + j) | (WH(blk + 6u + j) << 16);
    sumi += Dot4(qw & 0x0F0F0F0Fu, AW(a + j)) + Dot4((qw >> 4) & 0x0F0F0F0Fu, AW(a + j + 16u));
  }
#else
  [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
    const uint qb = WH(blk + 4u + j);
    sumi += int(qb & 15u) * AQ(a + j) + int((qb >> 4) & 15u) * AQ(a + j + 16u);
    sumi += int((qb >> 8) & 15u) * AQ(a + j + 1u) + int(qb >> 12) * AQ(a + j + 17u);
  }
#endif
  precise const float dd = WF16(blk) * AScale(ai);
  precise const float p0 = dd * float(sumi);
  precise const float pm = WF16(blk + 2u) * AS1(ai);
  precise const float p = p0 + pm;
#else  // Q5_0 (d, qh[4], qs[16]; values q - 16) and Q5_1 (d, m, qh[4], qs[16]; (d·da)·Σ q·a + m·s)
#if defined(W_Q5_0)
  const uint hb = blk + 2u, qs = blk + 6u;
  const int off = 16;
#else
  const uint hb = blk + 4u, qs = blk + 8u;
  const int off = 0;
#endif
  const uint qh = WH(hb) | (WH(hb + 2u) << 16);
#if defined(MM_DOT)
  [[unroll]] for (uint j = 0u; j < 16u; j += 4u) {
    const uint qw = WH(qs + j) | (WH(qs + 2u + j) << 16);
    uint lo = (qw & 0x0F0F0F0Fu) | (Spread4((qh >> j) & 15u) << 4);
    uint hi = ((qw >> 4) & 0x0F0F0F0Fu) | (Spread4((qh >> (j + 16u)) & 15u) << 4);
#if defined(W_Q5_0)
    lo = Q5Signed(lo);
    hi = Q5Signed(hi);
#endif
    sumi += Dot4(lo, AW(a + j)) + Dot4(hi, AW(a + j + 16u));
  }
#else
  [[unroll]] for (uint j = 0u; j < 16u; j += 2u) {
    const uint qb = WH(qs + j);
    [[unroll]] for (uint h = 0u; h < 2u; ++h) {
      const uint b = (qb >> (8u * h)) & 255u, jj = j + h;
      const int lo = int((b & 15u) | (((qh >> jj) & 1u) << 4)) - off;
      const int hi = int((b >> 4) | (((qh >> (jj + 16u)) & 1u) << 4)) - off;
      sumi += lo * AQ(a + jj) + hi * AQ(a + jj + 16u);
    }
  }
#endif
  precise const float dd = WF16(blk) * AScale(ai);
#if defined(W_Q5_0)
  precise const float p = dd * float(sumi);
#else
  precise const float p0 = dd * float(sumi);
  precise const float pm = WF16(blk + 2u) * AS1(ai);
  precise const float p = p0 + pm;
#endif
#endif
  return p;
}
#elif defined(W_Q4_K) || defined(W_Q5_K) || defined(W_Q6_K)
// Lane l (0..7) of a K-quant block: the float partial dk·aux32[l] of the values 8·m + l (sums[l] += it).
float LaneK(uint blk, uint a, uint ai, uint l) {
  int aux = 0;
#if defined(W_Q4_K) || defined(W_Q5_K)
#if defined(W_Q4_K)
  const uint qs = blk + 16u;
#else
  const uint qh = blk + 16u, qs = blk + 48u;
#endif
  const uint sc = blk + 4u;
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {  // sub-block j: 32 values
    const uint s = j < 4u ? (WB(sc + j) & 63u) : ((WB(sc + j + 4u) & 15u) | ((WB(sc + j - 4u) >> 6) << 4));
    const uint chunk = j / 2u, hi = j & 1u;
    [[unroll]] for (uint k = 0u; k < 32u; k += 8u) {
      const uint e = k + l;
      int v = int(hi == 0u ? (WB(qs + chunk * 32u + e) & 15u) : (WB(qs + chunk * 32u + e) >> 4));
#if defined(W_Q5_K)
      if ((WB(qh + e) & (1u << j)) != 0u) v += 16;
#endif
      aux += int(s) * (AQ(a + j * 32u + e) * v);
    }
  }
  precise const float dk = WF16(blk) * AScale(ai);
#else  // Q6_K
  const uint ql = blk, qh = blk + 128u, sc = blk + 192u;
  [[unroll]] for (uint g = 0u; g < 16u; ++g) {  // 16 groups of 16 values
    [[unroll]] for (uint k = 0u; k < 16u; k += 8u) {
      const uint e = g * 16u + k + l;  // element 0..255
      const uint half_ = e / 128u, in_half = e % 128u, quarter = in_half / 32u, ll = in_half % 32u;
      const uint qlb = ql + half_ * 64u + (quarter & 1u) * 32u + ll;
      const uint low = (quarter < 2u) ? (WB(qlb) & 15u) : (WB(qlb) >> 4);
      const uint high = (WB(qh + half_ * 32u + ll) >> (2u * quarter)) & 3u;
      const int v = int(low | (high << 4)) - 32;
      aux += I8(WB(sc + g)) * (AQ(a + e) * v);
    }
  }
  precise const float dk = WF16(blk + 208u) * AScale(ai);
#endif
  precise const float p = dk * float(aux);
  return p;
}
#if defined(W_Q4_K) || defined(W_Q5_K)
// The block's mins term dmin·Σ bsums·mins (sumf -= it).
float MinK(uint blk, uint ai) {
  const uint sc = blk + 4u;
  int sumi = 0;
  [[unroll]] for (uint j = 0u; j < 8u; ++j) {
    const uint m = j < 4u ? (WB(sc + j + 4u) & 63u) : ((WB(sc + j + 4u) >> 4) | ((WB(sc + j) >> 6) << 4));
    sumi += (ASum(ai * 16u + 2u * j) + ASum(ai * 16u + 2u * j + 1u)) * int(m);
  }
  precise const float dmin = WF16(blk + 2u) * AScale(ai);
  precise const float pm = dmin * float(sumi);
  return pm;
}
#endif
#endif

#if defined(MM_TILE) && defined(W_FLOAT)
// ---- F32 / F16 / BF16: 64 rows x 16 tokens per workgroup. ----------------------------------------------------
// Chunk by chunk of KC values, the 64 rows' values and the 16 tokens' activations are staged in shared memory
// (consecutive invocations read consecutive values of a row); then each invocation adds, for its row and each
// token, the chunk's float products to its double sums in value order: the per-element kernel's adds.
#define TNF 16u
#define KC 32u
#define FS 33u  // a staged row's stride (padded: the invocations of a workgroup read different banks)
shared float fw[64u * FS];
shared float fa[TNF * KC];
#if defined(W_F32)
float WVal(uint r, uint k) { return uintBitsToFloat(w32[(r * pc.row_bytes >> 2) + k]); }
float AVal(uint t, uint k) { return af[pc.a_offset + t * pc.K + k]; }
#elif defined(W_F16)
float WVal(uint r, uint k) { return F16ToF32(uint(w16[(r * pc.row_bytes >> 1) + k])); }
float AVal(uint t, uint k) { return F16ToF32(uint(ah[t * pc.K + k])); }
#else
float WVal(uint r, uint k) { return Bf16ToF32(uint(w16[(r * pc.row_bytes >> 1) + k])); }
float AVal(uint t, uint k) { return Bf16ToF32(uint(ah[t * pc.K + k])); }
#endif
void main() {
  const uint lid = gl_LocalInvocationID.x, r0 = pc.r_base + gl_WorkGroupID.x * 64u, r = r0 + lid;
  const uint t0 = LinearY() * TNF;
  if (t0 >= pc.N) return;
  const uint nt = min(TNF, pc.N - t0);
  precise double sum[TNF];
  [[unroll]] for (uint tt = 0u; tt < TNF; ++tt) sum[tt] = 0.0LF;
  for (uint c = 0u; c < pc.K; c += KC) {
    const uint kc = min(KC, pc.K - c);
    [[unroll]] for (uint j = 0u; j < KC; ++j) {  // 64 rows x KC values, 32 per invocation
      const uint q = j * 64u + lid, lr = q / KC, cc = q % KC;
      fw[lr * FS + cc] = (r0 + lr < pc.M && cc < kc) ? WVal(r0 + lr, c + cc) : 0.0;
    }
    [[unroll]] for (uint j = 0u; j < TNF * KC / 64u; ++j) {  // 16 tokens x KC values
      const uint q = j * 64u + lid, tt = q / KC, cc = q % KC;
      fa[q] = (tt < nt && cc < kc) ? AVal(t0 + tt, c + cc) : 0.0;
    }
    barrier();
    for (uint tt = 0u; tt < nt; ++tt) {
      [[unroll]] for (uint cc = 0u; cc < KC; ++cc) {
        if (cc < kc) {
          precise const float p = fw[lid * FS + cc] * fa[tt * KC + cc];
          sum[tt] += double(p);
        }
      }
    }
    barrier();
  }
  if (r >= pc.M) return;
  for (uint tt = 0u; tt < nt; ++tt) y[pc.y_offset + (t0 + tt) * pc.y_stride + r] = float(sum[tt]);
}

#elif defined(MM_TILE)
// ---- 64 rows x TN tokens per workgroup. ----------------------------------------------------------------------
// MAT_ID (matmul_<type>_id_tile, the MoE experts in prefill): the tile's TN output rows are entries
// LinearY()·TN .. + TN of the grouped order `ord` (moe_group.comp: each expert's rows together, its run padded
// with -1 to a multiple of 16, so a tile of 16 or 8 holds one expert's rows); the tile's expert is its first
// row's, and each weight block is read once for its TN rows. A row's arithmetic is the per-element kernel's.
#if defined(MAT_ID)
layout(std430, binding = 6) readonly buffer O { int ord[]; };
#endif
// The tile's token tt: its output row (-1: none), and a row's activation row.
int TileRow(uint t0, uint tt) {
#if defined(MAT_ID)
  return ord[t0 + tt];
#else
  return t0 + tt < pc.N ? int(t0 + tt) : -1;
#endif
}
uint ActRow(int row) {
#if defined(MAT_ID)
  return uint(row) / pc.a_div;
#else
  return uint(row);
#endif
}
void main() {
  const uint lid = gl_LocalInvocationID.x, r0 = pc.r_base + gl_WorkGroupID.x * 64u, r = r0 + lid;
  const uint t0 = LinearY() * TN, nb = pc.K / QK;
#if defined(MAT_ID)
  const int first = ord[t0];
  if (first < 0) return;  // a tile of padding (uniform over the workgroup, as the next return)
  const uint e = uint(ids[first]);
  if (e < pc.e_lo || e >= pc.e_hi) return;  // another part's expert
  const uint wrow0 = (e - pc.e_lo) * pc.e_stride + pc.r_off;  // the expert's first weight row
#else
  const uint wrow0 = 0u;
#endif
#if QKN == 32
  precise float sumf[TN];
  [[unroll]] for (uint tt = 0u; tt < TN; ++tt) sumf[tt] = 0.0;
#else
  precise float sumf[TN];
  precise float sums[TN][8];
  [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
    sumf[tt] = 0.0;
    [[unroll]] for (uint l = 0u; l < 8u; ++l) sums[tt][l] = 0.0;
  }
#endif
  for (uint i = 0u; i < nb; ++i) {
    // The 64 rows' block i: 16·BSZ words, two 16-bit loads each (a row's block is contiguous; rows past M: 0).
    [[unroll]] for (uint q0 = 0u; q0 < 16u * BSZ; q0 += 64u) {
      const uint q = q0 + lid;
      if (q0 + 64u <= 16u * BSZ || q < 16u * BSZ) {
        uint word = 0u;
        [[unroll]] for (uint h = 0u; h < 2u; ++h) {
          const uint s = 4u * q + 2u * h, lr = s / BSZ, rr = r0 + lr;
          if (rr < pc.M) word |= uint(w16[((wrow0 + rr) * pc.row_bytes + i * BSZ + (s - lr * BSZ)) >> 1]) << (16u * h);
        }
        sw[q] = word;
      }
    }
    // The TN tokens' activation block i (tokens past N: 0).
#if defined(KDOT)
    [[unroll]] for (uint q0 = 0u; q0 < TN * 64u; q0 += 64u) {  // word q: token q / 64, sub-block q / 8 % 8, lane q % 8
      const uint q = q0 + lid, tt = q / 64u, jl = q % 64u;
      const int tr = TileRow(t0, tt);
      uint word = 0u;
      if (tr >= 0) {
        const uint a0 = ActRow(tr) * pc.K + i * QK + 32u * (jl / 8u) + jl % 8u;
        word = (uint(aq[a0]) & 255u) | ((uint(aq[a0 + 8u]) & 255u) << 8) | ((uint(aq[a0 + 16u]) & 255u) << 16) |
               (uint(aq[a0 + 24u]) << 24);
      }
      sa[q] = word;
    }
#else
    [[unroll]] for (uint q0 = 0u; q0 < TN * QK / 4u; q0 += 64u) {
      const uint q = q0 + lid;
      if (q0 + 64u <= TN * QK / 4u || q < TN * QK / 4u) {
        const uint tt = q / (QK / 4u);
        const int tr = TileRow(t0, tt);
        sa[q] = tr >= 0 ? aq32[(ActRow(tr) * pc.K + i * QK) / 4u + (q - tt * (QK / 4u))] : 0u;
      }
    }
#endif
    if (lid < TN) {
      const int tr = TileRow(t0, lid);
      sd[lid] = tr >= 0 ? ad[ActRow(tr) * nb + i] : 0.0;
#if defined(ACT_Q8_1)
      ss[lid] = tr >= 0 ? intBitsToFloat(abs_[ActRow(tr) * nb + i]) : 0.0;
#endif
    }
#if QKN == 256
    [[unroll]] for (uint q0 = 0u; q0 < TN * 16u; q0 += 64u) {
      const uint q = q0 + lid, tt = q / 16u;
      if (q < TN * 16u) {
        const int tr = TileRow(t0, tt);
        sb[q] = tr >= 0 ? abs_[(ActRow(tr) * nb + i) * 16u + (q - tt * 16u)] : 0;
      }
    }
#endif
    barrier();
#if defined(KDOT)
    {
      const uint wb = lid * BSZ;  // this row's block in sw (bytes; Q6_K's 210-byte blocks are not word-aligned)
#if defined(W_Q6_K)
      int aux[TN][8];
      [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
        [[unroll]] for (uint l = 0u; l < 8u; ++l) aux[tt][l] = 0;
      }
      [[unroll]] for (uint gp = 0u; gp < 8u; ++gp) {  // values 32·gp .. + 31: groups 2gp and 2gp + 1
        const uint half_ = gp / 4u, quarter = gp % 4u;
        const uint ql_b = wb + half_ * 64u + (quarter & 1u) * 32u, qh_b = wb + 128u + half_ * 32u;  // bytes
        const int s0 = I8(WB(wb + 192u + 2u * gp)), s1 = I8(WB(wb + 192u + 2u * gp + 1u));
        uint v[8];
        [[unroll]] for (uint l = 0u; l < 8u; ++l) {
          const uint t = Gather8(ql_b, l), h = Gather8(qh_b, l);
          const uint q6 = ((quarter < 2u ? t : (t >> 4)) & 0x0F0F0F0Fu) | (((h >> (2u * quarter)) & 0x03030303u) << 4);
          v[l] = Q6Signed(q6);
        }
        [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
          [[unroll]] for (uint l = 0u; l < 8u; ++l) {
            const uint a = sa[tt * 64u + gp * 8u + l];
            aux[tt][l] += s0 * Dot4(v[l] & 0x0000FFFFu, a) + s1 * Dot4(v[l] & 0xFFFF0000u, a);
          }
        }
      }
      // Unrolled like the loops above, so that aux, sums and sumf are indexed by constants (registers, not
      // memory, on a GPU).
      [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {  // LaneK's float steps
        precise const float dk = WF16(wb + 208u) * AScale(tt);
        [[unroll]] for (uint l = 0u; l < 8u; ++l) {
          precise const float p = dk * float(aux[tt][l]);
          sums[tt][l] += p;
        }
      }
#else
#if defined(W_Q4_K)
      const uint qs_b = wb + 16u;
#else
      const uint qs_b = wb + 48u;
      uint qht[8];  // qh transposed: byte k of qht[l] = qh[l + 8k] (bit j: sub-block j's high bit)
      [[unroll]] for (uint l = 0u; l < 8u; ++l) qht[l] = Gather8(wb + 16u, l);
#endif
      int aux[TN][8];
      [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
        [[unroll]] for (uint l = 0u; l < 8u; ++l) aux[tt][l] = 0;
      }
      [[unroll]] for (uint c = 0u; c < 4u; ++c) {  // 32 bytes of qs: sub-blocks 2c (low nibbles), 2c + 1 (high)
        const uint j0 = 2u * c, j1 = 2u * c + 1u;
        const int s0 = int(j0 < 4u ? (WB(wb + 4u + j0) & 63u) : ((WB(wb + 4u + j0 + 4u) & 15u) | ((WB(wb + 4u + j0 - 4u) >> 6) << 4)));
        const int s1 = int(j1 < 4u ? (WB(wb + 4u + j1) & 63u) : ((WB(wb + 4u + j1 + 4u) & 15u) | ((WB(wb + 4u + j1 - 4u) >> 6) << 4)));
        uint lo[8], hi[8];
        [[unroll]] for (uint l = 0u; l < 8u; ++l) {
          const uint t = Gather8(qs_b + 32u * c, l);
          lo[l] = t & 0x0F0F0F0Fu;
          hi[l] = (t >> 4) & 0x0F0F0F0Fu;
#if defined(W_Q5_K)
          lo[l] |= ((qht[l] >> j0) & 0x01010101u) << 4;
          hi[l] |= ((qht[l] >> j1) & 0x01010101u) << 4;
#endif
        }
        [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
          [[unroll]] for (uint l = 0u; l < 8u; ++l)
            aux[tt][l] += s0 * Dot4(lo[l], sa[tt * 64u + j0 * 8u + l]) + s1 * Dot4(hi[l], sa[tt * 64u + j1 * 8u + l]);
        }
      }
      [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {  // LaneK's float steps, then MinK's (unrolled, as above)
        precise const float dk = WF16(wb) * AScale(tt);
        [[unroll]] for (uint l = 0u; l < 8u; ++l) {
          precise const float p = dk * float(aux[tt][l]);
          sums[tt][l] += p;
        }
        precise const float pm = MinK(wb, tt);
        sumf[tt] -= pm;
      }
#endif
    }
#else
    // Loops over tokens and lanes, not unrolled: unrolling TN x 8 K-quant lanes makes a shader glslc cannot
    // compile in 20 GB; they add TN·9 back-edges a block to lavapipe's count.
    for (uint tt = 0u; tt < TN; ++tt) {
#if QKN == 32
      precise const float p = BlockP(lid * BSZ, tt * QK, tt);
      sumf[tt] += p;
#else
      for (uint l = 0u; l < 8u; ++l) {
        precise const float p = LaneK(lid * BSZ, tt * QK, tt, l);
        sums[tt][l] += p;
      }
#if !defined(W_Q6_K)
      precise const float pm = MinK(lid * BSZ, tt);
      sumf[tt] -= pm;
#endif
#endif
    }
#endif
    barrier();
  }
  if (r >= pc.M) return;
  [[unroll]] for (uint tt = 0u; tt < TN; ++tt) {
    const int tr = TileRow(t0, tt);
    if (tr >= 0) {
#if QKN == 256
      [[unroll]] for (uint l = 0u; l < 8u; ++l) sumf[tt] += sums[tt][l];
#endif
      y[pc.y_offset + uint(tr) * pc.y_stride + r] = sumf[tt];
    }
  }
}

#elif defined(MM_SPLITK)
// ---- 4 rows of one token per workgroup, 16 invocations a row. ---------------------------------------------------
#if QKN == 32
#define UPB 1u  // invocations per block
#else
#define UPB 8u  // one per lane
#endif
#define BPC (16u / UPB)  // blocks per round
shared float sp[64];     // [4 rows][16] the round's partials
#if defined(W_Q4_K) || defined(W_Q5_K)
shared float sm[64];     // the mins terms (lane 0 of each block)
#endif
void main() {
  const uint lid = gl_LocalInvocationID.x, lr = lid / 16u, lb = lid % 16u;
  const uint r = pc.r_base + gl_WorkGroupID.x * 4u + lr, t = LinearY(), nb = pc.K / QK;
  bool live = t < pc.N;  // the same for the whole workgroup (its barriers)
#if defined(MAT_ID)
  const uint ta = t / pc.a_div;  // activation row
  const uint e = live ? uint(ids[t]) : pc.e_lo;
  live = live && e >= pc.e_lo && e < pc.e_hi;
  const uint row = ((e - pc.e_lo) * pc.e_stride + pc.r_off + min(r, pc.M - 1u)) * pc.row_bytes;
#else
  const uint ta = t;
  const uint row = min(r, pc.M - 1u) * pc.row_bytes;
#endif
  precise float sumf = 0.0;
#if QKN == 256
  precise float sums[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
#endif
  for (uint c = 0u; c < nb; c += BPC) {
    const uint i = c + lb / UPB;
    if (i < nb && live) {
      const uint blk = row + i * BSZ, a = ta * pc.K + i * QK, ai = ta * nb + i;
#if QKN == 32
      sp[lid] = BlockP(blk, a, ai);
#else
      sp[lid] = LaneK(blk, a, ai, lb % UPB);
#if !defined(W_Q6_K)
      if (lb % UPB == 0u) sm[lid] = MinK(blk, ai);
#endif
#endif
    }
    barrier();
    if (lb == 0u) {
      [[unroll]] for (uint b = 0u; b < BPC; ++b) {
        if (c + b < nb) {
#if QKN == 32
          sumf += sp[lid + b];
#else
          [[unroll]] for (uint l = 0u; l < 8u; ++l) sums[l] += sp[lid + b * 8u + l];
#if !defined(W_Q6_K)
          sumf -= sm[lid + b * 8u];
#endif
#endif
        }
      }
    }
    barrier();
  }
  if (lb != 0u || r >= pc.M || !live) return;
#if QKN == 256
  [[unroll]] for (uint l = 0u; l < 8u; ++l) sumf += sums[l];
#endif
  y[pc.y_offset + t * pc.y_stride + r] = sumf;
}

#else
// ---- One invocation per output element. --------------------------------------------------------------------
void main() {
  const uint r = pc.r_base + gl_GlobalInvocationID.x, t = LinearY();
  if (r >= pc.M || t >= pc.N) return;
#if defined(MAT_ID)
  const uint ta = t / pc.a_div;  // activation row
  const uint e = uint(ids[t]);
  if (e < pc.e_lo || e >= pc.e_hi) return;
  const uint row = ((e - pc.e_lo) * pc.e_stride + pc.r_off + r) * pc.row_bytes;
#else
  const uint ta = t;
  const uint row = r * pc.row_bytes;
#endif
#if defined(W_F32) || defined(W_F16) || defined(W_BF16)
  precise double sum = 0.0LF;
  for (uint i = 0u; i < pc.K; ++i) {
#if defined(W_F32)
    const uint o = row + 4u * i;
    const float wv = uintBitsToFloat(WB(o) | (WB(o + 1u) << 8) | (WB(o + 2u) << 16) | (WB(o + 3u) << 24));
    precise const float p = wv * af[pc.a_offset + ta * pc.K + i];
#elif defined(W_F16)
    precise const float p = WF16(row + 2u * i) * F16ToF32(uint(ah[ta * pc.K + i]));
#else
    precise const float p = Bf16ToF32(WB(row + 2u * i) | (WB(row + 2u * i + 1u) << 8)) * Bf16ToF32(uint(ah[ta * pc.K + i]));
#endif
    sum += double(p);
  }
  y[pc.y_offset + t * pc.y_stride + r] = float(sum);
#elif QKN == 32
  const uint nb = pc.K / QK;
  precise float sumf = 0.0;
  for (uint i = 0u; i < nb; ++i) {
    precise const float p = BlockP(row + i * BSZ, ta * pc.K + i * QK, ta * nb + i);
    sumf += p;
  }
  y[pc.y_offset + t * pc.y_stride + r] = sumf;
#else  // K-quants against Q8_K
  const uint nb = pc.K / QK;
  precise float sums[8] = float[8](0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
  precise float sumf = 0.0;
  for (uint i = 0u; i < nb; ++i) {
    const uint blk = row + i * BSZ, a = ta * pc.K + i * QK, ai = ta * nb + i;
    [[unroll]] for (uint l = 0u; l < 8u; ++l) {
      precise const float p = LaneK(blk, a, ai, l);
      sums[l] += p;
    }
#if !defined(W_Q6_K)
    precise const float pm = MinK(blk, ai);
    sumf -= pm;
#endif
  }
  [[unroll]] for (uint l = 0u; l < 8u; ++l) sumf += sums[l];
  y[pc.y_offset + t * pc.y_stride + r] = sumf;
#endif
}
#endif
