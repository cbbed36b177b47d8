// The attention kernel's variants (gpu/seq_ops.h AttentionKernel): the workgroup-per-(row, head) and the
// workgroup-per-(row, KV head) kernels keep every float operation of the serial one in its order, so each output
// is the same bits, over scattered pages,
// f16 and f32 pools, GQA groups, head dims 64 to 256, decode rows and prefill chunks with positions mid-block,
// long contexts, and multi-dispatch splits. Each test skips with a message without a Vulkan device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/device.h"
#include "gpu/gpu_testing.h"
#include "gpu/seq_ops.h"
#include "kernels/f16.h"
#include "kernels/kv_quant.h"
#include "kernels/random_testing.h"

namespace rw::gpu {
namespace {

using testing::Down;
using testing::Up;

// Sequences of ctx_len keys whose PS-row pages lie interleaved and out of order in one pool (plus unused pages),
// query rows at the given positions of each; the same keys laid out contiguously (one row per "page").
struct PagedCase {
  uint32_t D = 0, Hq = 0, Hkv = 0, PS = 16, N = 0, max_pos = 0;
  kernels::KvTypes types = kernels::KvType::kF32;
  std::vector<float> q, kpool, vpool, kc, vc;  // the pools' values (as the pages hold them: dequantised)
  std::vector<uint8_t> kbytes, vbytes;         // the pools' bytes in the case's K and V types
  std::vector<int32_t> rows, pages, crows, cpages;
};

kernels::KvTypes Kv(bool f16) { return f16 ? kernels::KvType::kF16 : kernels::KvType::kF32; }

// A pool of random rows of KW elements stored in type t: its bytes (the CPU's QuantizeKvRow, padded to whole
// words) and the values they hold (the CPU's exact dequantisation).
void FillPool(kernels::KvType t, uint32_t rows, uint32_t KW, uint64_t seed, std::vector<uint8_t>* bytes,
              std::vector<float>* values) {
  const std::vector<float> r = kernels::Random(static_cast<size_t>(rows) * KW, seed);
  const size_t rb = kernels::KvRowBytes(t, KW);
  bytes->assign((rows * rb + 3) / 4 * 4, 0);
  values->resize(r.size());
  for (uint32_t i = 0; i < rows; ++i) {
    kernels::QuantizeKvRow(t, r.data() + static_cast<size_t>(i) * KW, bytes->data() + i * rb, KW);
    kernels::ref::DequantizeKvRow(t, bytes->data() + i * rb, values->data() + static_cast<size_t>(i) * KW, KW);
  }
}

PagedCase MakePaged(uint32_t D, uint32_t Hq, uint32_t Hkv, kernels::KvTypes types, const std::vector<int32_t>& ctx_len,
                    const std::vector<std::vector<int32_t>>& queries, uint64_t seed) {
  PagedCase c;
  c.D = D;
  c.Hq = Hq;
  c.Hkv = Hkv;
  c.types = types;
  const uint32_t PS = c.PS, KW = Hkv * D;
  uint32_t n_pool = 3;
  for (int32_t n : ctx_len) n_pool += (static_cast<uint32_t>(n) + PS - 1) / PS;
  std::vector<int32_t> perm(n_pool);
  std::vector<bool> seen(n_pool, false);
  for (uint32_t i = 0; i < n_pool; ++i) {
    perm[i] = static_cast<int32_t>((i * 97u + 13u) % n_pool);
    seen[perm[i]] = true;
  }
  for (bool b : seen) EXPECT_TRUE(b) << "the page permutation must cover the pool";
  std::vector<std::vector<int32_t>> seq_pages(ctx_len.size());
  for (uint32_t next = 0; next < n_pool - 3;)
    for (size_t s = 0; s < ctx_len.size(); ++s)
      if (seq_pages[s].size() * PS < static_cast<size_t>(ctx_len[s])) seq_pages[s].push_back(perm[next++]);
  FillPool(types.k, n_pool * PS, KW, seed + 1, &c.kbytes, &c.kpool);
  FillPool(types.v, n_pool * PS, KW, seed + 2, &c.vbytes, &c.vpool);
  for (size_t s = 0; s < ctx_len.size(); ++s) {
    const int32_t off = static_cast<int32_t>(c.pages.size()), coff = static_cast<int32_t>(c.cpages.size());
    c.pages.insert(c.pages.end(), seq_pages[s].begin(), seq_pages[s].end());
    for (int32_t p = 0; p < ctx_len[s]; ++p) {
      const size_t src = (static_cast<size_t>(seq_pages[s][p / PS]) * PS + p % PS) * KW;
      c.cpages.push_back(static_cast<int32_t>(c.kc.size() / KW));
      c.kc.insert(c.kc.end(), c.kpool.begin() + src, c.kpool.begin() + src + KW);
      c.vc.insert(c.vc.end(), c.vpool.begin() + src, c.vpool.begin() + src + KW);
    }
    for (int32_t pos : queries[s]) {
      c.rows.insert(c.rows.end(), {off, pos});
      c.crows.insert(c.crows.end(), {coff, pos});
      c.max_pos = std::max(c.max_pos, static_cast<uint32_t>(pos));
      ++c.N;
    }
  }
  c.q = kernels::Random(c.N * Hq * D, seed + 3);
  return c;
}

// Runs the case's attention with `kernel`, through the pages (the pools' bytes in the case's types) or over the
// contiguous f32 rows of the values they hold.
std::vector<float> RunCase(Context& ctx, const PagedCase& c, AttentionKernel kernel, bool paged,
                           AttentionSplit split = AttentionSplit::kOff) {
  Buffer kb = paged ? Up(ctx, c.kbytes) : Up(ctx, c.kc), vb = paged ? Up(ctx, c.vbytes) : Up(ctx, c.vc);
  Buffer qb = Up(ctx, c.q), rb = Up(ctx, paged ? c.rows : c.crows), pb = Up(ctx, paged ? c.pages : c.cpages),
         ob = Up(ctx, std::vector<float>(c.q.size(), 7.0f)), ml;
  AttentionShape sh{c.N, c.Hq, c.Hkv, c.D, 1.0f / std::sqrt(static_cast<float>(c.D)), paged ? c.PS : 1};
  sh.k_type = paged ? kernels::KvTensorType(c.types.k) : gguf::TensorType::kF32;
  sh.v_type = paged ? kernels::KvTensorType(c.types.v) : gguf::TensorType::kF32;
  sh.kernel = kernel;
  sh.split = split;
  EXPECT_TRUE(RecordAttention(ctx, qb, kb, vb, ob, rb, pb, c.max_pos, sh, ml).ok());
  return Down(ctx, ob, c.q.size());
}

// Double-precision attention of the case's rows, against `o` within tol.
void ExpectNearDouble(const PagedCase& c, const std::vector<float>& o, double tol) {
  const uint32_t D = c.D, KW = c.Hkv * D;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  for (uint32_t i = 0; i < c.N; ++i)
    for (uint32_t h = 0; h < c.Hq; ++h) {
      const uint32_t off = static_cast<uint32_t>(c.crows[2 * i]), pos = static_cast<uint32_t>(c.crows[2 * i + 1]);
      const uint32_t kvh = h / (c.Hq / c.Hkv);
      const float* q = c.q.data() + (i * c.Hq + h) * D;
      std::vector<double> sc(pos + 1), acc(D, 0.0);
      double mx = -1e300, den = 0.0;
      for (uint32_t p = 0; p <= pos; ++p) {
        const float* k = c.kc.data() + (off + p) * KW + kvh * D;
        double t = 0.0;
        for (uint32_t d = 0; d < D; ++d) t += static_cast<double>(q[d]) * k[d];
        sc[p] = t * scale;
        mx = std::max(mx, sc[p]);
      }
      for (uint32_t p = 0; p <= pos; ++p) {
        const double w = std::exp(sc[p] - mx);
        den += w;
        const float* v = c.vc.data() + (off + p) * KW + kvh * D;
        for (uint32_t d = 0; d < D; ++d) acc[d] += w * v[d];
      }
      for (uint32_t d = 0; d < D; ++d)
        ASSERT_NEAR(o[(i * c.Hq + h) * D + d], acc[d] / den, tol) << "row " << i << " head " << h << " d " << d;
    }
}

void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  size_t diff = 0, first = a.size();
  for (size_t e = 0; e < a.size(); ++e)
    if (std::memcmp(&a[e], &b[e], 4) != 0) {
      ++diff;
      first = std::min(first, e);
    }
  EXPECT_EQ(diff, 0u) << what << ": " << diff << " of " << a.size() << " outputs differ, the first at " << first
                      << " (" << (first < a.size() ? a[first] : 0.0f) << " vs " << (first < b.size() ? b[first] : 0.0f)
                      << ")";
}

// Decode (one row at the end of a 5,000-key sequence), a prefill chunk mid-block and a row at 0 in a second
// sequence, for D = 64, 128, 256, GQA groups of 1, 2, 4, 8 (2 KV heads) and f32 / f16 pages: the parallel kernel
// gives the serial kernel's bits, through the pages and over the same rows laid out contiguously, near a
// double-precision twin. On lavapipe's real loop limit the D = 256 runs split into several dispatches.
TEST(GpuAttentionKernels, TheParallelKernelGivesTheSerialBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t D : {64u, 128u, 256u})
    for (const uint32_t G : {1u, 2u, 4u, 8u})
      for (const bool f16 : {false, true}) {
        SCOPED_TRACE(::testing::Message() << "D " << D << " GQA " << G << (f16 ? " f16" : " f32"));
        const uint32_t Hkv = 2, Hq = G * Hkv;
        // Large contexts for one config of each D (the others keep the test short on lavapipe).
        const bool big = G == 2;
        const std::vector<int32_t> len = {big ? 5000 : 700, 1300};
        const std::vector<std::vector<int32_t>> qs = {{len[0] - 1}, {1000, 1001, 1002, 1003, 0, 37}};
        const PagedCase c = MakePaged(D, Hq, Hkv, Kv(f16), len, qs, 1000 + D + 10 * G + (f16 ? 1 : 0));
        const std::vector<float> serial = RunCase(*ctx, c, AttentionKernel::kSerial, true);
        const std::vector<float> par = RunCase(*ctx, c, AttentionKernel::kParallel, true);
        ExpectSameBits(serial, par, "parallel vs serial, paged");
        ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kParallel, false), "parallel contiguous vs serial paged");
        ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kGroup, true), "group vs serial, paged");
        if (G == 1 || big) ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kSerial, false), "serial contiguous");
        ExpectNearDouble(c, par, 2e-5);
        if (::testing::Test::HasFailure()) return;
      }
}

// Decode alone (N = 1), a key count not a multiple of the block and the row's position mid-page.
TEST(GpuAttentionKernels, ADecodeRowAloneGivesTheSerialBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t D : {64u, 128u, 256u})
    for (const bool f16 : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "D " << D << (f16 ? " f16" : " f32"));
      const PagedCase c = MakePaged(D, 8, 1, Kv(f16), {2077}, {{2076}}, 2000 + D);
      const std::vector<float> serial = RunCase(*ctx, c, AttentionKernel::kSerial, true);
      ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kParallel, true), "parallel decode");
      ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kGroup, true), "group decode");
      ExpectNearDouble(c, serial, 2e-5);
    }
}

// A group size the group kernel has no variant for (3) runs the parallel kernel: still the serial bits.
TEST(GpuAttentionKernels, AGroupOfThreeHeadsGivesTheSerialBits) {
  REQUIRE_DEVICE(ctx);
  const PagedCase c = MakePaged(64, 6, 2, Kv(false), {600}, {{599, 300, 301}}, 2500);
  const std::vector<float> serial = RunCase(*ctx, c, AttentionKernel::kSerial, true);
  ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kGroup, true), "group of 3");
}

// The key blocks in several dispatches (one block each, three blocks each; the workgroups folded into y) and in
// one: the same bits for every kernel; D = 8 (lanes past D idle) and D = 256 (4 dims a lane, 32-key blocks).
TEST(GpuAttentionKernels, MultiDispatchSplitsGiveTheSameBits) {
  REQUIRE_DEVICE(ctx);
  for (const uint32_t D : {8u, 256u}) {
    SCOPED_TRACE(::testing::Message() << "D " << D);
    const PagedCase c = MakePaged(D, 4, 2, Kv(true), {300, 161}, {{0, 5, 63, 64, 65, 200, 299}, {160, 100, 31, 32}}, 3000 + D);
    const uint32_t B = AttentionBlock(D);
    const std::vector<float> serial = RunCase(*ctx, c, AttentionKernel::kSerial, true);
    const char* names[3] = {"serial split", "parallel split", "group split"};
    for (const AttentionKernel k : {AttentionKernel::kSerial, AttentionKernel::kParallel, AttentionKernel::kGroup}) {
      // Budgets of one block and of three blocks a dispatch for each kernel's charge (gpu/seq_ops.cc; G = 2).
      const uint64_t unit = k == AttentionKernel::kSerial     ? static_cast<uint64_t>(B) * (3 * D + 5) + 2 * D + 10
                            : k == AttentionKernel::kParallel ? D + 7 * B + 22
                                                              : 2 * (D + 6 * B + 22) + 10 * B + 18;
      const uint64_t fixed = k == AttentionKernel::kSerial ? 2 * D + 8 : k == AttentionKernel::kParallel ? 32 : 64;
      for (const uint64_t blocks : {1, 3}) {
        ctx->LimitForTesting(7, fixed + blocks * unit);  // and at most 7 workgroups a dimension: x folds into y
        const std::vector<float> split = RunCase(*ctx, c, k, true);
        ctx->LimitForTesting(0, 0);
        ExpectSameBits(serial, split, names[static_cast<int>(k) - 1]);
      }
    }
    ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kParallel, true), "parallel, one dispatch");
    ExpectSameBits(serial, RunCase(*ctx, c, AttentionKernel::kGroup, true), "group, one dispatch");
  }
}

// A row's key spans on workgroups of their own, folded by the combine kernel (AttentionSplit::kOn), give the
// bits of each kernel folding them as it goes: decode rows at depth 2,500 and 1,300 beside prefill rows inside
// the first span and across span ends (255, 256, 257), a lone decode row, D = 64 and 256 (its 32-key blocks: 8 a
// span), GQA 1 and 4, f16 and q8_0 pages; also with every span in several dispatches (lavapipe's budget,
// one block a dispatch) and with the workgroups folded into y. Near a double-precision twin.
TEST(GpuAttentionKernels, SpansOnWorkgroupsOfTheirOwnGiveTheUnsplitBits) {
  REQUIRE_DEVICE(ctx);
  using kernels::KvType;
  for (const uint32_t D : {64u, 256u})
    for (const uint32_t G : {1u, 4u}) {
      const kernels::KvTypes types = G == 1 ? kernels::KvTypes{KvType::kF16} : kernels::KvTypes{KvType::kQ8_0};
      SCOPED_TRACE(::testing::Message() << "D " << D << " GQA " << G << " " << kernels::KvTypesName(types));
      const uint32_t Hkv = 2, Hq = G * Hkv;
      const PagedCase c = MakePaged(D, Hq, Hkv, types, {2500, 1300, 600},
                                    {{2499}, {1299, 255, 256, 257, 0}, {599}}, 7000 + D + G);
      AttentionShape sh{c.N, c.Hq, c.Hkv, c.D, 1.0f, c.PS};
      sh.split = AttentionSplit::kOn;
      ASSERT_TRUE(AttentionSplits(*ctx, sh, c.max_pos)) << "the forced split must run here";
      sh.split = AttentionSplit::kOff;
      EXPECT_FALSE(AttentionSplits(*ctx, sh, c.max_pos));
      const std::vector<float> serial = RunCase(*ctx, c, AttentionKernel::kSerial, true);
      for (const AttentionKernel k : {AttentionKernel::kSerial, AttentionKernel::kParallel, AttentionKernel::kGroup}) {
        SCOPED_TRACE(::testing::Message() << "kernel " << static_cast<int>(k));
        ExpectSameBits(serial, RunCase(*ctx, c, k, true), "unsplit");
        ExpectSameBits(serial, RunCase(*ctx, c, k, true, AttentionSplit::kOn), "split");
      }
      ExpectNearDouble(c, serial, 2e-5);
      if (D == 256 && G == 4) {  // one block a dispatch, at most 40 workgroups a dimension
        for (const AttentionKernel k : {AttentionKernel::kSerial, AttentionKernel::kParallel, AttentionKernel::kGroup}) {
          const uint64_t B = AttentionBlock(D);
          ctx->LimitForTesting(40, k == AttentionKernel::kSerial     ? B * (3 * D + 5) + 4 * D + 18
                                  : k == AttentionKernel::kParallel ? D + 7 * B + 54
                                                                    : 4 * (D + 6 * B + 22) + 10 * B + 18 + 96);
          sh.split = AttentionSplit::kOn;
          EXPECT_TRUE(AttentionSplits(*ctx, sh, c.max_pos)) << "the split must run under the lowered limits too";
          const std::vector<float> split = RunCase(*ctx, c, k, true, AttentionSplit::kOn);
          ctx->LimitForTesting(0, 0);
          ExpectSameBits(serial, split, "split, one block a dispatch");
        }
      }
      const PagedCase one = MakePaged(D, Hq, Hkv, types, {3001}, {{3000}}, 7100 + D + G);
      const std::vector<float> alone = RunCase(*ctx, one, AttentionKernel::kParallel, true);
      ExpectSameBits(alone, RunCase(*ctx, one, AttentionKernel::kParallel, true, AttentionSplit::kOn), "lone decode");
      ExpectSameBits(alone, RunCase(*ctx, one, AttentionKernel::kGroup, true, AttentionSplit::kOn), "lone decode, group");
      if (::testing::Test::HasFailure()) return;
    }
}

// Whether a shape splits: never on request off, nor within one span, nor for heads over 256; kAuto on a GPU for
// few workgroups at depth (decode), not for a prefill chunk's many rows; never kAuto on a CPU device.
TEST(GpuAttentionKernels, TheSplitRunsWhereItCan) {
  REQUIRE_DEVICE(ctx);
  AttentionShape sh{1, 16, 4, 256, 1.0f, 256};
  const uint32_t span = AttentionBlock(256) * AttentionSpanBlocks(256);
  EXPECT_EQ(span, 256u);
  sh.split = AttentionSplit::kOn;
  EXPECT_FALSE(AttentionSplits(*ctx, sh, span - 1)) << "one span";
  EXPECT_TRUE(AttentionSplits(*ctx, sh, span));
  EXPECT_TRUE(AttentionSplits(*ctx, sh, 262143)) << "a decode row at the trained context: 16.9 MB of slots";
  sh.N = 4;
  EXPECT_FALSE(AttentionSplits(*ctx, sh, 262143)) << "over kAttentionSplitMaxBytes";
  sh.N = 1;
  sh.D = 512;
  EXPECT_FALSE(AttentionSplits(*ctx, sh, 4096)) << "heads over 256";
  sh.D = 256;
  sh.split = AttentionSplit::kOff;
  EXPECT_FALSE(AttentionSplits(*ctx, sh, 4096));
  sh.split = AttentionSplit::kAuto;
  const bool gpu = !ctx->runs_on_cpu();
  EXPECT_EQ(AttentionSplits(*ctx, sh, 16383), gpu) << "decode at depth";
  sh.N = 512;
  EXPECT_FALSE(AttentionSplits(*ctx, sh, 16383)) << "a prefill chunk has workgroups enough";
  EXPECT_TRUE(ParseAttentionSplit("auto").ok() && ParseAttentionSplit("0").ok() && ParseAttentionSplit("1").ok());
  EXPECT_FALSE(ParseAttentionSplit("yes").ok());
  EXPECT_EQ(AttentionScratchBytes(2, 8, 256), 4ull * 2 * 8 * 260 + kAttentionSplitMaxBytes);
}

// Every KV cache type, K and V alike or mixed: each kernel reading the pages' bytes (dequantised in the kernel)
// gives the bits of the same kernel over the f32 values those bytes hold (the CPU's exact dequantisation), for
// D = 64 and 128 (the block types' 32-element blocks inside a head), a decode row deep in a sequence and a chunk.
TEST(GpuAttentionKernels, EveryKvCacheTypeReadsTheValuesItsBytesHold) {
  REQUIRE_DEVICE(ctx);
  using kernels::KvType;
  std::vector<kernels::KvTypes> all;
  for (KvType t : kernels::kAllKvTypes) all.push_back(t);
  all.push_back({KvType::kQ8_0, KvType::kQ4_1});
  all.push_back({KvType::kF16, KvType::kQ5_0});
  all.push_back({KvType::kIQ4_NL, KvType::kBF16});
  for (const kernels::KvTypes t : all)
    for (const uint32_t D : {64u, 128u}) {
      SCOPED_TRACE(::testing::Message() << kernels::KvTypesName(t) << " D " << D);
      const PagedCase c = MakePaged(D, 4, 2, t, {333, 90}, {{332}, {40, 41, 42, 89}}, 5000 + D);
      const std::vector<float> flat = RunCase(*ctx, c, AttentionKernel::kSerial, false);
      ExpectSameBits(flat, RunCase(*ctx, c, AttentionKernel::kSerial, true), "serial, pages");
      ExpectSameBits(flat, RunCase(*ctx, c, AttentionKernel::kParallel, true), "parallel, pages");
      ExpectSameBits(flat, RunCase(*ctx, c, AttentionKernel::kGroup, true), "group, pages");
      if (::testing::Test::HasFailure()) return;
    }
}

TEST(GpuAttentionKernels, AutoPicksAVariantAndTheParallelOnesRefuseHeadsOver256) {
  REQUIRE_DEVICE(ctx);
  const AttentionKernel k = PickAttentionKernel(*ctx, AttentionKernel::kAuto);
  EXPECT_NE(k, AttentionKernel::kAuto);
  if (ctx->info().type != "cpu") {
    EXPECT_EQ(k, AttentionKernel::kParallel) << "a GPU runs the parallel kernel";
  }
  EXPECT_EQ(PickAttentionKernel(*ctx, AttentionKernel::kSerial), AttentionKernel::kSerial);
  const PagedCase c = MakePaged(512, 1, 1, Kv(false), {3}, {{2}}, 4000);
  Buffer kb = Up(*ctx, c.kpool), vb = Up(*ctx, c.vpool), qb = Up(*ctx, c.q), rb = Up(*ctx, c.rows),
         pb = Up(*ctx, c.pages), ob = Up(*ctx, std::vector<float>(c.q.size())), ml;
  AttentionShape sh{c.N, c.Hq, c.Hkv, c.D, 1.0f, c.PS};
  sh.kernel = AttentionKernel::kParallel;
  EXPECT_FALSE(RecordAttention(*ctx, qb, kb, vb, ob, rb, pb, c.max_pos, sh, ml).ok());
  sh.kernel = AttentionKernel::kGroup;
  EXPECT_FALSE(RecordAttention(*ctx, qb, kb, vb, ob, rb, pb, c.max_pos, sh, ml).ok());
  sh.kernel = AttentionKernel::kAuto;  // falls back to the serial kernel
  EXPECT_TRUE(RecordAttention(*ctx, qb, kb, vb, ob, rb, pb, c.max_pos, sh, ml).ok());
  // Run what was recorded while its buffers live (on lavapipe a buffer is host memory: a later submit would
  // write into freed memory).
  EXPECT_TRUE(ctx->Submit().ok());
  EXPECT_TRUE(ParseAttentionKernel("parallel").ok() && ParseAttentionKernel("serial").ok() &&
              ParseAttentionKernel("group").ok() && ParseAttentionKernel("auto").ok());
  EXPECT_FALSE(ParseAttentionKernel("fast").ok());
}

}  // namespace
}  // namespace rw::gpu
