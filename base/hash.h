// Stable 64-bit hashing (FNV-1a based, seedable). Not cryptographic; used for token-prefix tags,
// model fingerprints and payload checksums, which must be identical across runs and machines.
#pragma once

#include <cstddef>
#include <cstdint>
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

// Hash of a token prefix, extendable one token at a time: HashTokens(a+b) == HashTokens(b, HashTokens(a)).
inline uint64_t HashTokens(std::span<const int32_t> tokens, uint64_t h = kFnvOffset) {
  for (int32_t t : tokens) h = HashMix(h, static_cast<uint32_t>(t));
  return h;
}

}  // namespace rw
