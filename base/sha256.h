// SHA-256 and HMAC-SHA256 (OpenSSL's libcrypto underneath), and bytes from the kernel's cryptographic random
// generator. For what must resist a deliberate collision or forgery: content keys of images, MACs of values read
// back from a shared store, identifiers a client must not guess. The FNV hashes of base/hash.h stay for tags and
// checksums that only guard against accidents.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/expected.h"

namespace rw {

using Digest256 = std::array<uint8_t, 32>;

// One-shot SHA-256 of a byte range.
Digest256 Sha256(std::span<const uint8_t> data);
Digest256 Sha256(std::string_view data);

// Incremental SHA-256: Update any number of times, then Final once.
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void Update(const void* data, size_t n);
  void Update(std::string_view s) { Update(s.data(), s.size()); }
  Digest256 Final();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// HMAC-SHA256(key, message); `parts` are concatenated in order (no copy).
Digest256 HmacSha256(std::span<const uint8_t> key, std::span<const std::span<const uint8_t>> parts);
Digest256 HmacSha256(std::string_view key, std::string_view message);

// Constant-time comparison of two digests (for MAC checks).
bool DigestEqual(const Digest256& a, const Digest256& b);

// Lower-case hex of a digest.
std::string DigestHex(const Digest256& d);

// n bytes from getrandom(2) (the kernel's CSPRNG); an error only if the kernel refuses.
Status SecureRandomBytes(void* out, size_t n);

}  // namespace rw
