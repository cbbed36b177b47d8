// GGUF layout description (see describe.h).
#include "gguf/describe.h"

#include <cstdio>

#include "base/hash.h"
#include "base/hex.h"

namespace rw::gguf {
namespace {

constexpr size_t kMaxInlineString = 64;
constexpr size_t kMaxInlineArray = 16;

uint64_t HashValue(const Value& v, uint64_t h) {
  const uint32_t t = static_cast<uint32_t>(v.type);
  h = HashBytes(&t, sizeof t, h);
  switch (v.type) {
    case ValueType::kString:
      return HashString(v.s, HashMix(h, v.s.size()));
    case ValueType::kArray:
      h = HashMix(h, v.array.size());
      for (const Value& e : v.array) h = HashValue(e, h);
      return h;
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      return HashBytes(&v.f, sizeof v.f, h);
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      return HashMix(h, static_cast<uint64_t>(v.i));
    default:
      return HashMix(h, v.u);
  }
}

}  // namespace

std::string DescribeValue(const Value& v) {
  char buf[64];
  switch (v.type) {
    case ValueType::kString:
      if (v.s.size() <= kMaxInlineString && v.s.find('\n') == std::string::npos) return "\"" + v.s + "\"";
      return "<" + std::to_string(v.s.size()) + " bytes fnv " + HexU64(HashString(v.s)) + ">";
    case ValueType::kArray: {
      std::string s = "[" + std::string(ValueTypeName(v.elem_type)) + " x" + std::to_string(v.array.size());
      if (v.array.size() <= kMaxInlineArray) {
        s += ":";
        for (const Value& e : v.array) s += " " + DescribeValue(e);
      } else {
        s += " fnv " + HexU64(HashValue(v, kFnvOffset));
      }
      return s + "]";
    }
    case ValueType::kFloat32:
    case ValueType::kFloat64:
      std::snprintf(buf, sizeof buf, "%.17g", v.f);
      return buf;
    case ValueType::kInt8:
    case ValueType::kInt16:
    case ValueType::kInt32:
    case ValueType::kInt64:
      return std::to_string(v.i);
    default:
      return std::to_string(v.u);
  }
}

std::string DescribeLayout(const File& file) {
  std::string out =
      "version " + std::to_string(file.version()) + "\nalignment " + std::to_string(file.alignment()) + "\n";
  for (const auto& [key, value] : file.metadata()) {
    out += "kv " + key + " " + ValueTypeName(value.type) + " " + DescribeValue(value) + "\n";
  }
  for (const TensorInfo& t : file.tensors()) {
    out += "tensor " + t.name + " " + TypeName(t.type) + " " + t.ShapeString() +
           " offset=" + std::to_string(t.offset) + " nbytes=" + std::to_string(t.nbytes) + "\n";
  }
  return out;
}

std::vector<TypeTotal> TotalsByType(const File& file) {
  std::vector<TypeTotal> out;
  for (const TensorInfo& t : file.tensors()) {
    auto it = out.begin();
    while (it != out.end() && static_cast<uint32_t>(it->type) < static_cast<uint32_t>(t.type)) ++it;
    if (it == out.end() || it->type != t.type) it = out.insert(it, TypeTotal{t.type});
    ++it->tensors;
    it->elements += t.n_elements();
    it->bytes += t.nbytes;
  }
  return out;
}

}  // namespace rw::gguf
