#include "vision/image_cache.h"

#include <cstring>

namespace rw::vision {

Digest256 ImageKey(const RgbImage& img, const Digest256& mmproj_identity, const PreprocessOptions& opt) {
  Sha256Hasher h;
  h.Update("rewind-image-v1");
  const int32_t head[4] = {img.width, img.height, opt.min_tokens, opt.max_tokens};
  h.Update(head, sizeof(head));
  h.Update(mmproj_identity.data(), mmproj_identity.size());
  h.Update(img.rgb.data(), img.rgb.size());
  return h.Final();
}

size_t EmbeddingCache::KeyHash::operator()(const Digest256& d) const {
  size_t v;
  std::memcpy(&v, d.data(), sizeof(v));
  return v;
}

namespace {
int64_t SizeOf(const ImageEmbedding& e) { return static_cast<int64_t>(e.rows.size() * sizeof(float)) + 64; }
}  // namespace

std::shared_ptr<const ImageEmbedding> EmbeddingCache::Get(const Digest256& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->second;
}

void EmbeddingCache::Put(const Digest256& key, std::shared_ptr<const ImageEmbedding> e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = index_.find(key); it != index_.end()) {
    bytes_ -= SizeOf(*it->second->second);
    lru_.erase(it->second);
    index_.erase(it);
  }
  const int64_t size = SizeOf(*e);
  if (size > max_bytes_) return;
  lru_.emplace_front(key, std::move(e));
  index_[key] = lru_.begin();
  bytes_ += size;
  while (bytes_ > max_bytes_) {
    bytes_ -= SizeOf(*lru_.back().second);
    index_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

int64_t EmbeddingCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}
int64_t EmbeddingCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(lru_.size());
}
uint64_t EmbeddingCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}
uint64_t EmbeddingCache::misses() const {
  std::lock_guard<std::mutex> lock(mu_);
  return misses_;
}

}  // namespace rw::vision
