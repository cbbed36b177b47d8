// GGUF writer (see writer.h).
#include "gguf/writer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/check.h"

namespace rw::gguf {
namespace {

constexpr uint64_t kMaxTensorName = 63;

Value Scalar(ValueType t) {
  Value v;
  v.type = t;
  return v;
}

}  // namespace

Value MakeU8(uint8_t v) {
  Value r = Scalar(ValueType::kUint8);
  r.u = v;
  return r;
}
Value MakeI8(int8_t v) {
  Value r = Scalar(ValueType::kInt8);
  r.i = v;
  return r;
}
Value MakeU16(uint16_t v) {
  Value r = Scalar(ValueType::kUint16);
  r.u = v;
  return r;
}
Value MakeI16(int16_t v) {
  Value r = Scalar(ValueType::kInt16);
  r.i = v;
  return r;
}
Value MakeU32(uint32_t v) {
  Value r = Scalar(ValueType::kUint32);
  r.u = v;
  return r;
}
Value MakeI32(int32_t v) {
  Value r = Scalar(ValueType::kInt32);
  r.i = v;
  return r;
}
Value MakeU64(uint64_t v) {
  Value r = Scalar(ValueType::kUint64);
  r.u = v;
  return r;
}
Value MakeI64(int64_t v) {
  Value r = Scalar(ValueType::kInt64);
  r.i = v;
  return r;
}
Value MakeF32(float v) {
  Value r = Scalar(ValueType::kFloat32);
  r.f = v;
  return r;
}
Value MakeF64(double v) {
  Value r = Scalar(ValueType::kFloat64);
  r.f = v;
  return r;
}
Value MakeBool(bool v) {
  Value r = Scalar(ValueType::kBool);
  r.u = v ? 1 : 0;
  return r;
}
Value MakeString(std::string v) {
  Value r = Scalar(ValueType::kString);
  r.s = std::move(v);
  return r;
}
Value MakeArray(ValueType elem, std::vector<Value> elements) {
  for (const Value& e : elements) REWIND_CHECK(e.type == elem);
  Value r = Scalar(ValueType::kArray);
  r.elem_type = elem;
  r.array = std::move(elements);
  return r;
}
Value MakeStringArray(const std::vector<std::string>& v) {
  std::vector<Value> e;
  e.reserve(v.size());
  for (const std::string& s : v) e.push_back(MakeString(s));
  return MakeArray(ValueType::kString, std::move(e));
}
Value MakeI32Array(const std::vector<int32_t>& v) {
  std::vector<Value> e;
  for (int32_t x : v) e.push_back(MakeI32(x));
  return MakeArray(ValueType::kInt32, std::move(e));
}
Value MakeF32Array(const std::vector<float>& v) {
  std::vector<Value> e;
  for (float x : v) e.push_back(MakeF32(x));
  return MakeArray(ValueType::kFloat32, std::move(e));
}
Value MakeBoolArray(const std::vector<bool>& v) {
  std::vector<Value> e;
  for (bool x : v) e.push_back(MakeBool(x));
  return MakeArray(ValueType::kBool, std::move(e));
}

Writer::~Writer() {
  if (fp_) {
    std::fclose(fp_);
    std::remove(tmp_path_.c_str());
  }
}

void Writer::Set(const std::string& key, Value value) {
  REWIND_CHECK_MSG(!open_, "Writer::Set('%s') after Open", key.c_str());
  REWIND_CHECK(!key.empty());
  if (key == "general.alignment") {
    REWIND_CHECK_MSG(value.type == ValueType::kUint32 && value.u != 0 && (value.u & (value.u - 1)) == 0,
                     "general.alignment must be a UINT32 power of two");
    REWIND_CHECK_MSG(tensors_.empty(), "set general.alignment before adding tensors");
    alignment_ = value.u;
  }
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

Status Writer::AddTensor(const std::string& name, TensorType type, std::span<const int64_t> ne) {
  REWIND_CHECK(!open_);
  if (name.empty() || name.size() > kMaxTensorName) {
    return Error::InvalidArgument("tensor name '" + name + "' must have 1 to 63 bytes");
  }
  for (const TensorInfo& t : tensors_) {
    if (t.name == name) return Error::InvalidArgument("duplicate tensor name '" + name + "'");
  }
  if (ne.size() > 4) return Error::InvalidArgument("tensor '" + name + "': more than 4 dimensions");
  const TypeInfo* info = GetTypeInfo(type);
  if (!info) return Error::InvalidArgument("tensor '" + name + "': unknown type");
  TensorInfo ti;
  ti.name = name;
  ti.type = type;
  ti.n_dims = static_cast<uint32_t>(ne.size());
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] < 0) return Error::InvalidArgument("tensor '" + name + "': negative dimension");
    ti.ne[d] = ne[d];
  }
  if (ti.ne[0] % info->block_size != 0) {
    return Error::InvalidArgument("tensor '" + name + "': ne[0] = " + std::to_string(ti.ne[0]) +
                                  " is not a multiple of the " + info->name + " block size " +
                                  std::to_string(info->block_size));
  }
  uint64_t nbytes = static_cast<uint64_t>(ti.ne[0] / info->block_size);
  bool overflow = __builtin_mul_overflow(nbytes, static_cast<uint64_t>(info->block_bytes), &nbytes);
  int64_t elems = 1;
  for (int d = 0; d < 4; ++d) {
    overflow |= __builtin_mul_overflow(elems, ti.ne[d], &elems);
    if (d > 0) overflow |= __builtin_mul_overflow(nbytes, static_cast<uint64_t>(ti.ne[d]), &nbytes);
  }
  uint64_t padded = 0, next = 0;
  overflow |= __builtin_add_overflow(nbytes, (alignment_ - nbytes % alignment_) % alignment_, &padded);
  overflow |= __builtin_add_overflow(next_offset_, padded, &next);
  if (overflow) return Error::InvalidArgument("tensor '" + name + "': byte size overflows");
  ti.nbytes = nbytes;
  ti.offset = next_offset_;
  next_offset_ = next;
  tensors_.push_back(std::move(ti));
  return Status::Ok();
}

namespace {
uint64_t StringSize(const std::string& s) { return 8 + s.size(); }
uint64_t ValueSize(const Value& v) {
  if (v.type == ValueType::kString) return StringSize(v.s);
  if (v.type == ValueType::kArray) {
    uint64_t n = 12;
    for (const Value& e : v.array) n += ValueSize(e);
    return n;
  }
  return ScalarSize(v.type);
}
}  // namespace

uint64_t Writer::FileSize() const {
  uint64_t n = 4 + 4 + 8 + 8;
  for (const auto& [k, v] : kv_) n += StringSize(k) + 4 + ValueSize(v);
  for (const TensorInfo& t : tensors_) n += StringSize(t.name) + 4 + 8 * t.n_dims + 4 + 8;
  if (tensors_.empty()) return n;
  n += (alignment_ - n % alignment_) % alignment_;
  return n + next_offset_;
}

Status Writer::WriteRaw(const void* data, uint64_t n) {
  if (n == 0) return Status::Ok();
  if (buffer_) {
    const auto* p = static_cast<const uint8_t*>(data);
    buffer_->insert(buffer_->end(), p, p + n);
  } else if (std::fwrite(data, 1, n, fp_) != n) {
    return Error::Io(tmp_path_ + ": write failed: " + std::strerror(errno));
  }
  total_written_ += n;
  return Status::Ok();
}

Status Writer::WriteString(const std::string& s) {
  const uint64_t n = s.size();
  REWIND_RETURN_IF_ERROR(WriteRaw(&n, 8));
  return WriteRaw(s.data(), n);
}

Status Writer::WriteValue(const Value& v) {
  switch (v.type) {
    case ValueType::kUint8:
    case ValueType::kBool: {
      const uint8_t x = static_cast<uint8_t>(v.u);
      return WriteRaw(&x, 1);
    }
    case ValueType::kInt8: {
      const int8_t x = static_cast<int8_t>(v.i);
      return WriteRaw(&x, 1);
    }
    case ValueType::kUint16: {
      const uint16_t x = static_cast<uint16_t>(v.u);
      return WriteRaw(&x, 2);
    }
    case ValueType::kInt16: {
      const int16_t x = static_cast<int16_t>(v.i);
      return WriteRaw(&x, 2);
    }
    case ValueType::kUint32: {
      const uint32_t x = static_cast<uint32_t>(v.u);
      return WriteRaw(&x, 4);
    }
    case ValueType::kInt32: {
      const int32_t x = static_cast<int32_t>(v.i);
      return WriteRaw(&x, 4);
    }
    case ValueType::kFloat32: {
      const float x = static_cast<float>(v.f);
      return WriteRaw(&x, 4);
    }
    case ValueType::kUint64:
      return WriteRaw(&v.u, 8);
    case ValueType::kInt64:
      return WriteRaw(&v.i, 8);
    case ValueType::kFloat64:
      return WriteRaw(&v.f, 8);
    case ValueType::kString:
      return WriteString(v.s);
    case ValueType::kArray: {
      const uint32_t et = static_cast<uint32_t>(v.elem_type);
      const uint64_t n = v.array.size();
      REWIND_RETURN_IF_ERROR(WriteRaw(&et, 4));
      REWIND_RETURN_IF_ERROR(WriteRaw(&n, 8));
      for (const Value& e : v.array) {
        REWIND_CHECK(e.type == v.elem_type);
        REWIND_RETURN_IF_ERROR(WriteValue(e));
      }
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status Writer::Pad(uint64_t written) {
  static const uint8_t kZeros[256] = {};
  uint64_t pad = (alignment_ - written % alignment_) % alignment_;
  while (pad > 0) {
    const uint64_t n = pad < sizeof kZeros ? pad : sizeof kZeros;
    REWIND_RETURN_IF_ERROR(WriteRaw(kZeros, n));
    pad -= n;
  }
  return Status::Ok();
}

Status Writer::Open(const std::string& path) {
  REWIND_CHECK(!open_);
  path_ = path;
  tmp_path_ = path + ".tmp." + std::to_string(::getpid());
  fp_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!fp_) return Error::Io(tmp_path_ + ": " + std::strerror(errno));
  std::setvbuf(fp_, nullptr, _IOFBF, 1 << 20);
  open_ = true;
  return WriteHeader();
}

Status Writer::OpenBuffer(std::vector<uint8_t>* out) {
  REWIND_CHECK(!open_ && out != nullptr);
  buffer_ = out;
  buffer_->clear();
  open_ = true;
  return WriteHeader();
}

Status Writer::WriteHeader() {
  const uint32_t version = 3;
  const int64_t n_tensors = static_cast<int64_t>(tensors_.size());
  const int64_t n_kv = static_cast<int64_t>(kv_.size());
  REWIND_RETURN_IF_ERROR(WriteRaw("GGUF", 4));
  REWIND_RETURN_IF_ERROR(WriteRaw(&version, 4));
  REWIND_RETURN_IF_ERROR(WriteRaw(&n_tensors, 8));
  REWIND_RETURN_IF_ERROR(WriteRaw(&n_kv, 8));
  for (const auto& [k, v] : kv_) {
    REWIND_RETURN_IF_ERROR(WriteString(k));
    const uint32_t t = static_cast<uint32_t>(v.type);
    REWIND_RETURN_IF_ERROR(WriteRaw(&t, 4));
    REWIND_RETURN_IF_ERROR(WriteValue(v));
  }
  for (const TensorInfo& ti : tensors_) {
    REWIND_RETURN_IF_ERROR(WriteString(ti.name));
    REWIND_RETURN_IF_ERROR(WriteRaw(&ti.n_dims, 4));
    REWIND_RETURN_IF_ERROR(WriteRaw(ti.ne, 8 * ti.n_dims));
    const uint32_t t = static_cast<uint32_t>(ti.type);
    REWIND_RETURN_IF_ERROR(WriteRaw(&t, 4));
    REWIND_RETURN_IF_ERROR(WriteRaw(&ti.offset, 8));
  }
  if (!tensors_.empty()) REWIND_RETURN_IF_ERROR(Pad(total_written_));
  return Status::Ok();
}

Status Writer::WriteTensorChunk(std::string_view name, const void* data, uint64_t nbytes) {
  REWIND_CHECK(open_);
  if (next_tensor_ >= tensors_.size()) {
    return Error::InvalidArgument("tensor '" + std::string(name) +
                                  "': all declared tensors are already written");
  }
  const TensorInfo& ti = tensors_[next_tensor_];
  if (ti.name != name) {
    return Error::InvalidArgument("tensor '" + std::string(name) + "' written out of order: expected '" +
                                  ti.name + "'");
  }
  if (nbytes > ti.nbytes - tensor_written_) {
    return Error::InvalidArgument("tensor '" + ti.name + "': " + std::to_string(tensor_written_ + nbytes) +
                                  " bytes given, size is " + std::to_string(ti.nbytes));
  }
  REWIND_RETURN_IF_ERROR(WriteRaw(data, nbytes));
  tensor_written_ += nbytes;
  if (tensor_written_ == ti.nbytes) {
    REWIND_RETURN_IF_ERROR(Pad(ti.nbytes));
    ++next_tensor_;
    tensor_written_ = 0;
  }
  return Status::Ok();
}

Status Writer::WriteTensor(std::string_view name, const void* data, uint64_t nbytes) {
  if (next_tensor_ < tensors_.size() && tensors_[next_tensor_].name == name &&
      (tensor_written_ != 0 || nbytes != tensors_[next_tensor_].nbytes)) {
    return Error::InvalidArgument("tensor '" + std::string(name) + "': " + std::to_string(nbytes) +
                                  " bytes given, size is " + std::to_string(tensors_[next_tensor_].nbytes));
  }
  return WriteTensorChunk(name, data, nbytes);
}

Status Writer::Close() {
  REWIND_CHECK(open_);
  if (next_tensor_ != tensors_.size()) {
    return Error::InvalidArgument("Close: tensor '" + tensors_[next_tensor_].name + "' was not written");
  }
  if (buffer_) return Status::Ok();
  std::FILE* fp = fp_;
  fp_ = nullptr;
  bool ok = std::fflush(fp) == 0 && ::fsync(fileno(fp)) == 0;
  const int e = errno;
  ok &= std::fclose(fp) == 0;
  if (!ok) {
    std::remove(tmp_path_.c_str());
    return Error::Io(tmp_path_ + ": flush failed: " + std::strerror(e));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int e2 = errno;
    std::remove(tmp_path_.c_str());
    return Error::Io("rename to " + path_ + ": " + std::strerror(e2));
  }
  return Status::Ok();
}

}  // namespace rw::gguf
