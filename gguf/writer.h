// GGUF writer: version 3, metadata in insertion order, tensors in declaration order with llama.cpp's strict
// offsets (offset_0 = 0, offset_{i+1} = offset_i + roundup(nbytes_i, alignment)), every tensor padded to the
// alignment. Deterministic: the same calls give the same bytes. Tensor data is streamed (one tensor at a
// time), so a multi-GB model never has to be in memory. Format: ../shared/spec/gguf-and-quants.md section 1.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "gguf/gguf.h"

namespace rw::gguf {

// Value constructors (for Writer::Set and for building arrays).
Value MakeU8(uint8_t v);
Value MakeI8(int8_t v);
Value MakeU16(uint16_t v);
Value MakeI16(int16_t v);
Value MakeU32(uint32_t v);
Value MakeI32(int32_t v);
Value MakeU64(uint64_t v);
Value MakeI64(int64_t v);
Value MakeF32(float v);
Value MakeF64(double v);
Value MakeBool(bool v);
Value MakeString(std::string v);
// Elements must all have type `elem`; nested arrays are written (llama.cpp itself rejects them on read).
Value MakeArray(ValueType elem, std::vector<Value> elements);
Value MakeStringArray(const std::vector<std::string>& v);
Value MakeI32Array(const std::vector<int32_t>& v);
Value MakeF32Array(const std::vector<float>& v);
Value MakeBoolArray(const std::vector<bool>& v);

class Writer {
 public:
  Writer() = default;
  ~Writer();
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // Metadata, in insertion order. Setting an existing key replaces its value in place (like gguf_set_*).
  // `general.alignment` (UINT32 power of two) also sets the data alignment. Only before Open.
  void Set(const std::string& key, Value value);
  void SetU32(const std::string& key, uint32_t v) { Set(key, MakeU32(v)); }
  void SetI32(const std::string& key, int32_t v) { Set(key, MakeI32(v)); }
  void SetF32(const std::string& key, float v) { Set(key, MakeF32(v)); }
  void SetBool(const std::string& key, bool v) { Set(key, MakeBool(v)); }
  void SetString(const std::string& key, std::string v) { Set(key, MakeString(std::move(v))); }
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }

  // Declares the next tensor (ne[0] first). Errors: bad name (empty, > 63 bytes, duplicate), > 4 dims,
  // negative dims, unknown type, ne[0] not a multiple of the block size, byte size overflow.
  Status AddTensor(const std::string& name, TensorType type, std::span<const int64_t> ne);
  Status AddTensor(const std::string& name, TensorType type, std::initializer_list<int64_t> ne) {
    return AddTensor(name, type, std::span<const int64_t>(ne.begin(), ne.size()));
  }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // offsets filled in by AddTensor
  uint64_t alignment() const { return alignment_; }
  // Exact size of the file once every tensor is written.
  uint64_t FileSize() const;

  // Writes header, metadata and tensor infos to "<path>.tmp.<pid>"; Close() renames it over `path`.
  Status Open(const std::string& path);
  // Same, into memory (tests).
  Status OpenBuffer(std::vector<uint8_t>* out);
  // Data of the next tensor in declaration order; `nbytes` must equal its size. May be given in several
  // chunks through WriteTensorChunk, then the tensor completes when its size is reached.
  Status WriteTensor(std::string_view name, const void* data, uint64_t nbytes);
  Status WriteTensorChunk(std::string_view name, const void* data, uint64_t nbytes);
  // Checks every tensor was written, flushes, fsyncs and renames into place.
  Status Close();

 private:
  Status WriteHeader();
  Status WriteRaw(const void* data, uint64_t n);
  Status WriteValue(const Value& v);
  Status WriteString(const std::string& s);
  Status Pad(uint64_t written);

  std::vector<std::pair<std::string, Value>> kv_;
  std::vector<TensorInfo> tensors_;
  uint64_t alignment_ = 32;
  uint64_t next_offset_ = 0;

  // Open state.
  bool open_ = false;
  std::FILE* fp_ = nullptr;
  std::string path_, tmp_path_;
  std::vector<uint8_t>* buffer_ = nullptr;
  size_t next_tensor_ = 0;
  uint64_t tensor_written_ = 0;  // bytes of tensors_[next_tensor_] written so far
  uint64_t total_written_ = 0;
};

}  // namespace rw::gguf
