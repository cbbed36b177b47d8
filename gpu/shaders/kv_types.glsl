// The KV cache element formats of a layer's page pool, the bytes the CPU's kernels::QuantizeKvRow writes (codes
// from the host's gpu::KvFormatCode): 0 f32, 1 f16 and 2 bf16 (two to a 32-bit word), then the 32-element GGUF
// blocks 3 Q8_0, 4 Q4_0, 5 Q4_1, 6 Q5_0, 7 Q5_1, 8 IQ4_NL. A pool is a run of whole blocks (a row of KW elements
// is KW / 32 blocks), so element e of the pool lives in block e / 32 whatever its row.
#define KV_F32 0u
#define KV_F16 1u
#define KV_BF16 2u
#define KV_Q8_0 3u
#define KV_Q4_0 4u
#define KV_Q4_1 5u
#define KV_Q5_0 6u
#define KV_Q5_1 7u
#define KV_IQ4_NL 8u

const int kIq4Nl[16] = int[16](-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113);

// Bytes of one block: d (f16), then m (f16: the _1 types), qh (4 bytes: Q5), qs (16 nibble bytes; Q8_0: 32 int8).
uint KvBlockBytes(uint t) {
  return t == KV_Q8_0 ? 34u : t == KV_Q4_1 ? 20u : t == KV_Q5_0 ? 22u : t == KV_Q5_1 ? 24u : 18u;
}
uint KvQhOff(uint t) { return t == KV_Q5_0 ? 2u : 4u; }
uint KvQsOff(uint t) {
  return t == KV_Q4_1 ? 4u : t == KV_Q5_0 ? 6u : t == KV_Q5_1 ? 8u : 2u;
}
// The byte of qs that holds element j of a block (nibble types: j < 16 low nibble of qs[j], else high of qs[j - 16]).
uint KvQsByte(uint t, uint j) { return KvQsOff(t) + (t == KV_Q8_0 ? j : (j & 15u)); }

// Element j of a block from its fields (d and m: f16 bits; qh: Q5's high bits; qb: the qs byte of KvQsByte):
// the exact arithmetic of the CPU's dequantisers, d·q or d·q + m, each operation rounded once.
float KvBlockValue(uint t, uint j, uint dbits, uint mbits, uint qh, uint qb) {
  const float d = F16ToF32(dbits);
  if (t == KV_Q8_0) return float(int(qb) - int((qb & 0x80u) << 1)) * d;
  const uint nib = j < 16u ? (qb & 0xFu) : (qb >> 4);
  if (t == KV_Q4_0) return float(int(nib) - 8) * d;
  if (t == KV_IQ4_NL) return d * float(kIq4Nl[nib]);
  const uint q5 = nib | (((qh >> j) & 1u) << 4);
  if (t == KV_Q5_0) return float(int(q5) - 16) * d;
  const float m = F16ToF32(mbits);
  precise const float r = float(t == KV_Q4_1 ? nib : q5) * d + m;
  return r;
}

// KV_DEFINE_ELEMENT(W, B) defines float KvElement_W(t, e): element e of a pool of type t read through the word
// view W and the byte view B of the same buffer (GLSL passes no buffers to functions).
#define KV_DEFINE_ELEMENT(W, B)                                                                         \
  float KvElement_##W(uint t, uint e) {                                                                 \
    if (t == KV_F32) return uintBitsToFloat(W[e]);                                                      \
    if (t == KV_F16 || t == KV_BF16) {                                                                  \
      const uint h = (W[e >> 1] >> ((e & 1u) * 16u)) & 0xFFFFu;                                         \
      return t == KV_F16 ? F16ToF32(h) : Bf16ToF32(h);                                                  \
    }                                                                                                   \
    const uint base = (e >> 5) * KvBlockBytes(t), j = e & 31u;                                          \
    const uint d = uint(B[base]) | (uint(B[base + 1u]) << 8);                                           \
    const bool has_m = t == KV_Q4_1 || t == KV_Q5_1, q5 = t == KV_Q5_0 || t == KV_Q5_1;                 \
    const uint m = has_m ? uint(B[base + 2u]) | (uint(B[base + 3u]) << 8) : 0u;                         \
    const uint o = base + KvQhOff(t);                                                                   \
    const uint qh = q5 ? uint(B[o]) | (uint(B[o + 1u]) << 8) | (uint(B[o + 2u]) << 16) | (uint(B[o + 3u]) << 24) \
                       : 0u;                                                                            \
    return KvBlockValue(t, j, d, m, qh, uint(B[base + KvQsByte(t, j)]));                               \
  }
