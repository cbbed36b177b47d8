#include "base/sha256.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"

namespace rw {

struct Sha256Hasher::Ctx {
  EVP_MD_CTX* md = nullptr;
};

Sha256Hasher::Sha256Hasher() : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  REWIND_CHECK(ctx_->md != nullptr);
  REWIND_CHECK(EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1);
}

Sha256Hasher::~Sha256Hasher() { EVP_MD_CTX_free(ctx_->md); }

void Sha256Hasher::Update(const void* data, size_t n) {
  if (n > 0) REWIND_CHECK(EVP_DigestUpdate(ctx_->md, data, n) == 1);
}

Digest256 Sha256Hasher::Final() {
  Digest256 d{};
  unsigned int len = 0;
  REWIND_CHECK(EVP_DigestFinal_ex(ctx_->md, d.data(), &len) == 1 && len == d.size());
  return d;
}

Digest256 Sha256(std::span<const uint8_t> data) {
  Sha256Hasher h;
  h.Update(data.data(), data.size());
  return h.Final();
}

Digest256 Sha256(std::string_view data) {
  return Sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(data.data()), data.size()));
}

Digest256 HmacSha256(std::span<const uint8_t> key, std::span<const std::span<const uint8_t>> parts) {
  // HMAC by its definition (RFC 2104) over the incremental hasher: H((K ^ opad) || H((K ^ ipad) || m)).
  constexpr size_t kBlock = 64;
  uint8_t k0[kBlock] = {};
  if (key.size() > kBlock) {
    const Digest256 hk = Sha256(key);
    std::memcpy(k0, hk.data(), hk.size());
  } else if (!key.empty()) {
    std::memcpy(k0, key.data(), key.size());
  }
  uint8_t pad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) pad[i] = k0[i] ^ 0x36;
  Sha256Hasher inner;
  inner.Update(pad, kBlock);
  for (const auto& p : parts) inner.Update(p.data(), p.size());
  const Digest256 ih = inner.Final();
  for (size_t i = 0; i < kBlock; ++i) pad[i] = k0[i] ^ 0x5c;
  Sha256Hasher outer;
  outer.Update(pad, kBlock);
  outer.Update(ih.data(), ih.size());
  return outer.Final();
}

Digest256 HmacSha256(std::string_view key, std::string_view message) {
  const std::span<const uint8_t> part(reinterpret_cast<const uint8_t*>(message.data()), message.size());
  return HmacSha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()),
                    std::span<const std::span<const uint8_t>>(&part, 1));
}

bool DigestEqual(const Digest256& a, const Digest256& b) {
  uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= a[i] ^ b[i];
  return diff == 0;
}

std::string DigestHex(const Digest256& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(d.size() * 2, '0');
  for (size_t i = 0; i < d.size(); ++i) {
    s[2 * i] = kHex[d[i] >> 4];
    s[2 * i + 1] = kHex[d[i] & 15];
  }
  return s;
}

Status SecureRandomBytes(void* out, size_t n) {
  auto* p = static_cast<uint8_t*>(out);
  while (n > 0) {
    const ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return Error::Internal(std::string("getrandom failed: ") + std::strerror(errno));
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
  return {};
}

}  // namespace rw
