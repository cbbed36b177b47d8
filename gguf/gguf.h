// GGUF reader: mmap'd, fully validated at open. Every size and offset is checked against the file size with
// overflow-safe arithmetic; a truncated, corrupt or hostile file gives an Error naming the field and offset.
// Format: ../shared/spec/gguf-and-quants.md section 1.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/expected.h"
#include "gguf/types.h"

namespace rw::gguf {

enum class ValueType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6, kBool = 7,
  kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* ValueTypeName(ValueType t);
// Encoded bytes of one scalar of type t; 0 for kString and kArray (their size depends on the value).
uint64_t ScalarSize(ValueType t);

namespace internal {
// printf into a std::string (error messages of the reader; at most 511 characters).
std::string Fmt(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace internal

// One metadata value. Scalars are stored widened; arrays hold their elements (nested arrays allowed on read).
struct Value {
  ValueType type = ValueType::kUint8;
  // Scalars: exactly one of these is meaningful, chosen by `type`.
  uint64_t u = 0;   // kUint8..kUint64, kBool (0/1)
  int64_t i = 0;    // kInt8..kInt64
  double f = 0;     // kFloat32, kFloat64 (a float32 is stored exactly)
  std::string s;    // kString
  ValueType elem_type = ValueType::kUint8;  // kArray: element type
  std::vector<Value> array;                 // kArray: elements
};

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 0;
  int64_t ne[4] = {1, 1, 1, 1};  // ne[0] contiguous; trailing dims 1
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;           // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr; // points into the mapping; valid while the File lives

  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  // Bytes of one row (ne[0] elements).
  uint64_t row_bytes() const;
  std::string ShapeString() const;  // "{256, 512}"
};

class File {
 public:
  // Maps and validates the file. Errors name the field and byte offset.
  static Expected<std::unique_ptr<File>> Open(const std::string& path);
  // Same validation over a copy of an in-memory buffer (tests, fuzzing).
  static Expected<std::unique_ptr<File>> FromBuffer(std::span<const uint8_t> bytes);
  ~File();
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  uint64_t file_size() const { return size_; }
  const std::string& path() const { return path_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, Value>>& metadata() const { return kv_; }
  const Value* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }

  // Strict typed getters (llama.cpp semantics: the stored type must match). Error names the key and both types.
  Expected<uint32_t> GetU32(std::string_view key) const;
  Expected<int32_t> GetI32(std::string_view key) const;
  Expected<uint64_t> GetU64(std::string_view key) const;
  Expected<float> GetF32(std::string_view key) const;
  Expected<bool> GetBool(std::string_view key) const;
  Expected<std::string> GetString(std::string_view key) const;
  // Arrays. GetStringArray requires element type string; the numeric ones accept any integer element type
  // whose values fit, and GetF32Array any numeric type.
  Expected<std::vector<std::string>> GetStringArray(std::string_view key) const;
  Expected<std::vector<int64_t>> GetIntArray(std::string_view key) const;
  Expected<std::vector<float>> GetF32Array(std::string_view key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* FindTensor(std::string_view name) const;

  // A hash of the metadata and the tensor layout (names, types, shapes, offsets) - the model fingerprint
  // used by persisted caches. Does not read tensor data.
  uint64_t Fingerprint() const;

 private:
  File() = default;
  Status Parse();

  std::string path_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  void* map_ = nullptr;              // mmap base (null when owned_ is used)
  std::vector<uint8_t> owned_;       // FromBuffer copy
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, Value>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace rw::gguf
