// Lookups, typed getters and the fingerprint of a parsed GGUF (the parser is gguf.cc).
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <limits>

#include "base/hash.h"
#include "gguf/gguf.h"

namespace rw::gguf {
namespace {
using internal::Fmt;


bool IsIntType(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kUint16:
    case ValueType::kInt16:
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kUint64:
    case ValueType::kInt64:
      return true;
    default:
      return false;
  }
}
bool IsUnsigned(ValueType t) {
  return t == ValueType::kUint8 || t == ValueType::kUint16 || t == ValueType::kUint32 ||
         t == ValueType::kUint64;
}

void HashValue(const Value& v, uint64_t* h) {
  const uint32_t t = static_cast<uint32_t>(v.type);
  *h = HashBytes(&t, sizeof t, *h);
  switch (v.type) {
    case ValueType::kString: {
      const uint64_t n = v.s.size();
      *h = HashBytes(&n, sizeof n, *h);
      *h = HashBytes(v.s.data(), v.s.size(), *h);
      break;
    }
    case ValueType::kArray: {
      const uint32_t et = static_cast<uint32_t>(v.elem_type);
      const uint64_t n = v.array.size();
      *h = HashBytes(&et, sizeof et, *h);
      *h = HashBytes(&n, sizeof n, *h);
      for (const Value& e : v.array) HashValue(e, h);
      break;
    }
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      *h = HashBytes(&v.f, sizeof v.f, *h);
      break;
    default:
      *h = HashBytes(&v.u, sizeof v.u, *h);
      *h = HashBytes(&v.i, sizeof v.i, *h);
  }
}

Error TypeMismatch(std::string_view key, const char* want, ValueType got) {
  return Error::InvalidArgument(Fmt("key '%.*s' has type %s, expected %s", static_cast<int>(key.size()),
                                    key.data(), ValueTypeName(got), want));
}

}  // namespace

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
      return "UINT8";
    case ValueType::kInt8:
      return "INT8";
    case ValueType::kUint16:
      return "UINT16";
    case ValueType::kInt16:
      return "INT16";
    case ValueType::kUint32:
      return "UINT32";
    case ValueType::kInt32:
      return "INT32";
    case ValueType::kFloat32:
      return "FLOAT32";
    case ValueType::kBool:
      return "BOOL";
    case ValueType::kString:
      return "STRING";
    case ValueType::kArray:
      return "ARRAY";
    case ValueType::kUint64:
      return "UINT64";
    case ValueType::kInt64:
      return "INT64";
    case ValueType::kFloat64:
      return "FLOAT64";
  }
  return "?";
}

uint64_t TensorInfo::row_bytes() const {
  const TypeInfo* info = GetTypeInfo(type);
  if (!info) return 0;
  return static_cast<uint64_t>(ne[0] / info->block_size) * static_cast<uint64_t>(info->block_bytes);
}

std::string TensorInfo::ShapeString() const {
  std::string s = "{";
  for (uint32_t d = 0; d < n_dims && d < 4; ++d) {
    if (d) s += ", ";
    s += std::to_string(ne[d]);
  }
  return s + "}";
}

const Value* File::Find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

const TensorInfo* File::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

#define REWIND_GGUF_FIND(key)                                           \
  const Value* v = Find(key);                                           \
  if (!v) {                                                             \
    return Error::NotFound("key '" + std::string(key) + "' not found"); \
  }

Expected<uint32_t> File::GetU32(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kUint32) return TypeMismatch(key, "UINT32", v->type);
  return static_cast<uint32_t>(v->u);
}
Expected<int32_t> File::GetI32(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kInt32) return TypeMismatch(key, "INT32", v->type);
  return static_cast<int32_t>(v->i);
}
Expected<uint64_t> File::GetU64(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kUint64) return TypeMismatch(key, "UINT64", v->type);
  return v->u;
}
Expected<float> File::GetF32(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kFloat32) return TypeMismatch(key, "FLOAT32", v->type);
  return static_cast<float>(v->f);
}
Expected<bool> File::GetBool(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kBool) return TypeMismatch(key, "BOOL", v->type);
  return v->u != 0;
}
Expected<std::string> File::GetString(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kString) return TypeMismatch(key, "STRING", v->type);
  return v->s;
}
Expected<std::vector<std::string>> File::GetStringArray(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kArray || v->elem_type != ValueType::kString) {
    return TypeMismatch(key, "ARRAY of STRING", v->type);
  }
  std::vector<std::string> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) out.push_back(e.s);
  return out;
}
Expected<std::vector<int64_t>> File::GetIntArray(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  if (v->type != ValueType::kArray || !IsIntType(v->elem_type)) {
    return TypeMismatch(key, "ARRAY of integers", v->type);
  }
  std::vector<int64_t> out;
  out.reserve(v->array.size());
  for (size_t k = 0; k < v->array.size(); ++k) {
    const Value& e = v->array[k];
    if (IsUnsigned(v->elem_type)) {
      if (e.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Error::OutOfRange(Fmt("key '%.*s'[%zu]: %" PRIu64 " does not fit in int64",
                                     static_cast<int>(key.size()), key.data(), k, e.u));
      }
      out.push_back(static_cast<int64_t>(e.u));
    } else {
      out.push_back(e.i);
    }
  }
  return out;
}
Expected<std::vector<float>> File::GetF32Array(std::string_view key) const {
  REWIND_GGUF_FIND(key);
  const bool is_float = v->elem_type == ValueType::kFloat32 || v->elem_type == ValueType::kFloat64;
  if (v->type != ValueType::kArray || !(is_float || IsIntType(v->elem_type))) {
    return TypeMismatch(key, "ARRAY of numbers", v->type);
  }
  std::vector<float> out;
  out.reserve(v->array.size());
  for (const Value& e : v->array) {
    if (is_float)
      out.push_back(static_cast<float>(e.f));
    else if (IsUnsigned(v->elem_type))
      out.push_back(static_cast<float>(e.u));
    else
      out.push_back(static_cast<float>(e.i));
  }
  return out;
}
#undef REWIND_GGUF_FIND

uint64_t File::Fingerprint() const {
  uint64_t h = kFnvOffset;
  h = HashBytes(&version_, sizeof version_, h);
  for (const auto& [key, value] : kv_) {
    h = HashString(key, h);
    HashValue(value, &h);
  }
  for (const TensorInfo& ti : tensors_) {
    h = HashString(ti.name, h);
    const uint32_t type = static_cast<uint32_t>(ti.type);
    h = HashBytes(&type, sizeof type, h);
    h = HashBytes(&ti.n_dims, sizeof ti.n_dims, h);
    h = HashBytes(ti.ne, sizeof ti.ne, h);
    h = HashBytes(&ti.offset, sizeof ti.offset, h);
  }
  return h;
}

}  // namespace rw::gguf
