// Content keys of images and a bounded cache of encoder outputs, so a repeated image is not re-encoded. The key
// (SHA-256) covers what decides the embedding bits: the decoded pixels and their size, the mmproj file's identity
// and the preprocessing settings. Thread-safe (request threads encode concurrently).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "base/sha256.h"
#include "vision/encoder.h"

namespace rw::vision {

Digest256 ImageKey(const RgbImage& img, const Digest256& mmproj_identity, const PreprocessOptions& opt);

class EmbeddingCache {
 public:
  explicit EmbeddingCache(int64_t max_bytes) : max_bytes_(max_bytes) {}
  // The cached embedding for `key`, or null (a hit moves it to the front).
  std::shared_ptr<const ImageEmbedding> Get(const Digest256& key);
  // Inserts (replacing an equal key), then evicts the least recently used entries beyond the byte bound. An
  // entry larger than the whole bound is not kept.
  void Put(const Digest256& key, std::shared_ptr<const ImageEmbedding> e);
  int64_t bytes() const;
  int64_t entries() const;
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  struct KeyHash {
    size_t operator()(const Digest256& d) const;
  };
  using Entry = std::pair<Digest256, std::shared_ptr<const ImageEmbedding>>;
  mutable std::mutex mu_;
  int64_t max_bytes_;
  int64_t bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
  std::list<Entry> lru_;  // front = most recent
  std::unordered_map<Digest256, std::list<Entry>::iterator, KeyHash> index_;
};

}  // namespace rw::vision
