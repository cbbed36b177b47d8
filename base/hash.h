// Stable 64-bit hashing (FNV-1a based, seedable). Not cryptographic; used for token-prefix tags,
// model fingerprints and payload checksums, which must be identical across runs and machines.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

namespace rw {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ull;

inline uint64_t HashBytes(const void* data, size_t n, uint64_t h = kFnvOffset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= kFnvPrime;
  }
  return h;
}

inline uint64_t HashString(std::string_view s, uint64_t h = kFnvOffset) { return HashBytes(s.data(), s.size(), h); }

// Mixes one 64-bit value into h (splitmix finaliser over h ^ v): fast for token streams.
inline uint64_t HashMix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Checksum of a large payload (store values: recurrent states of tens of MiB). Four independent lanes over
// little-endian 64-bit words, so it runs at memory speed where the byte-serial HashBytes does about 0.7 GB/s.
// Any change of one 8-byte word changes the result (each lane step is a bijection of the lane for a fixed word).
// The value is part of the store format (memory/store_format.h): changing it needs a format version bump.
inline uint64_t ChecksumBytes(const void* data, size_t n, uint64_t seed = kFnvOffset) {
  constexpr uint64_t kK1 = 0x9e3779b97f4a7c15ull, kK2 = 0xc2b2ae3d27d4eb4full;
  const auto* p = static_cast<const unsigned char*>(data);
  auto word = [&](size_t at) {
    uint64_t w;
    std::memcpy(&w, p + at, 8);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;
  };
  auto step = [](uint64_t lane, uint64_t w) { return std::rotl(lane ^ (w * kK1), 31) * kK2; };
  uint64_t lane[4] = {seed, seed ^ kK1, seed ^ kK2, seed ^ (kK1 * kK2)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    lane[0] = step(lane[0], word(i));
    lane[1] = step(lane[1], word(i + 8));
    lane[2] = step(lane[2], word(i + 16));
    lane[3] = step(lane[3], word(i + 24));
  }
  uint64_t h = HashMix(seed, n);
  for (uint64_t l : lane) h = HashMix(h, l);
  return HashBytes(p + i, n - i, h);
}

// Hash of a token prefix, extendable one token at a time: HashTokens(a+b) == HashTokens(b, HashTokens(a)).
inline uint64_t HashTokens(std::span<const int32_t> tokens, uint64_t h = kFnvOffset) {
  for (int32_t t : tokens) h = HashMix(h, static_cast<uint32_t>(t));
  return h;
}

}  // namespace rw
