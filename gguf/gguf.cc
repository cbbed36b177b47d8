// GGUF reader (../shared/spec/gguf-and-quants.md section 1). Everything is validated at open: a hostile
// header cannot make the reader allocate more than a small multiple of the file size or read outside the
// mapping.
#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>

namespace rw::gguf {

namespace internal {
std::string Fmt(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}
}  // namespace internal

uint64_t ScalarSize(ValueType t) {
  switch (t) {
    case ValueType::kUint8:
    case ValueType::kInt8:
    case ValueType::kBool:
      return 1;
    case ValueType::kUint16:
    case ValueType::kInt16:
      return 2;
    case ValueType::kUint32:
    case ValueType::kInt32:
    case ValueType::kFloat32:
      return 4;
    case ValueType::kUint64:
    case ValueType::kInt64:
    case ValueType::kFloat64:
      return 8;
    case ValueType::kString:
    case ValueType::kArray:
      return 0;
  }
  return 0;
}

namespace {

using internal::Fmt;

constexpr uint64_t kMaxTensorName = 63;  // GGML_MAX_NAME - 1
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS
constexpr int kMaxArrayDepth = 8;        // nested arrays (llama.cpp allows none)
// Values are ~100 bytes in memory; this caps metadata memory at well under 1 GiB whatever the header says.
constexpr uint64_t kMaxTotalArrayElements = uint64_t{8} << 20;


// Smallest encoded size of one value of type t (for bounding counts by the remaining bytes).
uint64_t MinEncodedSize(ValueType t) {
  if (t == ValueType::kString) return 8;   // the length
  if (t == ValueType::kArray) return 12;   // element type + count
  return ScalarSize(t);
}

bool ValidValueType(uint32_t t) { return t <= static_cast<uint32_t>(ValueType::kFloat64); }

// Bounds-checked little-endian reader over the mapping. `what` names the field for errors.
class Cursor {
 public:
  Cursor(const uint8_t* base, uint64_t size) : base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }

  Status Bytes(void* dst, uint64_t n, const std::string& what) {
    if (n > remaining()) {
      return Error::Corrupt(Fmt("%s at offset %" PRIu64 ": needs %" PRIu64 " bytes, file has %" PRIu64
                                " left",
                                what.c_str(), pos_, n, remaining()));
    }
    if (n) std::memcpy(dst, base_ + pos_, n);
    pos_ += n;
    return Status::Ok();
  }
  template <typename T>
  Status Pod(T* v, const std::string& what) {
    return Bytes(v, sizeof(T), what);
  }

  Status String(std::string* s, const std::string& what,
                uint64_t max_len = std::numeric_limits<uint64_t>::max()) {
    const uint64_t at = pos_;
    uint64_t len = 0;
    REWIND_RETURN_IF_ERROR(Pod(&len, what + " length"));
    if (len > max_len) {
      return Error::Corrupt(
          Fmt("%s at offset %" PRIu64 ": length %" PRIu64 " > %" PRIu64, what.c_str(), at, len, max_len));
    }
    if (len > remaining()) {
      return Error::Corrupt(Fmt("%s at offset %" PRIu64 ": length %" PRIu64 " exceeds the %" PRIu64
                                " bytes left in the file",
                                what.c_str(), at, len, remaining()));
    }
    s->assign(reinterpret_cast<const char*>(base_ + pos_), len);
    pos_ += len;
    return Status::Ok();
  }

 private:
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

class MetaParser {
 public:
  explicit MetaParser(Cursor* c) : c_(*c) {}

  Status ReadValue(ValueType t, Value* v, const std::string& what, int depth) {
    v->type = t;
    switch (t) {
      case ValueType::kUint8: {
        uint8_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->u = x;
        break;
      }
      case ValueType::kInt8: {
        int8_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->i = x;
        break;
      }
      case ValueType::kUint16: {
        uint16_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->u = x;
        break;
      }
      case ValueType::kInt16: {
        int16_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->i = x;
        break;
      }
      case ValueType::kUint32: {
        uint32_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->u = x;
        break;
      }
      case ValueType::kInt32: {
        int32_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->i = x;
        break;
      }
      case ValueType::kUint64: {
        uint64_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->u = x;
        break;
      }
      case ValueType::kInt64: {
        int64_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->i = x;
        break;
      }
      case ValueType::kFloat32: {
        float x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->f = x;
        break;
      }
      case ValueType::kFloat64: {
        double x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->f = x;
        break;
      }
      case ValueType::kBool: {
        uint8_t x;
        REWIND_RETURN_IF_ERROR(c_.Pod(&x, what));
        v->u = x != 0;
        break;
      }
      case ValueType::kString:
        REWIND_RETURN_IF_ERROR(c_.String(&v->s, what));
        break;
      case ValueType::kArray:
        return ReadArray(v, what, depth);
    }
    return Status::Ok();
  }

 private:
  Status ReadArray(Value* v, const std::string& what, int depth) {
    const uint64_t at = c_.pos();
    if (depth >= kMaxArrayDepth) {
      return Error::Corrupt(
          Fmt("%s at offset %" PRIu64 ": arrays nested deeper than %d", what.c_str(), at, kMaxArrayDepth));
    }
    uint32_t et = 0;
    REWIND_RETURN_IF_ERROR(c_.Pod(&et, what + " element type"));
    if (!ValidValueType(et)) {
      return Error::Corrupt(
          Fmt("%s at offset %" PRIu64 ": unknown array element type %u", what.c_str(), at, et));
    }
    v->elem_type = static_cast<ValueType>(et);
    const uint64_t count_at = c_.pos();
    uint64_t count = 0;
    REWIND_RETURN_IF_ERROR(c_.Pod(&count, what + " array count"));
    const uint64_t min_size = MinEncodedSize(v->elem_type);
    if (count > c_.remaining() / min_size) {
      return Error::Corrupt(
          Fmt("%s at offset %" PRIu64 ": array count %" PRIu64 " of %s needs at least %" PRIu64 "x%" PRIu64
              " bytes, file has %" PRIu64 " left",
              what.c_str(), count_at, count, ValueTypeName(v->elem_type), count, min_size, c_.remaining()));
    }
    if (count > kMaxTotalArrayElements - total_elements_) {
      return Error::Corrupt(Fmt("%s at offset %" PRIu64 ": array count %" PRIu64
                                " exceeds the limit of %" PRIu64 " array elements per file",
                                what.c_str(), count_at, count, kMaxTotalArrayElements));
    }
    total_elements_ += count;
    v->array.resize(count);
    for (uint64_t k = 0; k < count; ++k) {
      // The element index is added only on failure: no per-element string building for 250k-entry
      // vocabularies.
      Status s = ReadValue(v->elem_type, &v->array[k], what, depth + 1);
      if (!s.ok()) return Error{s.error().kind, s.error().message + Fmt(" (array element %" PRIu64 ")", k)};
    }
    return Status::Ok();
  }

  Cursor& c_;
  uint64_t total_elements_ = 0;
};

uint64_t RoundUp(uint64_t x, uint64_t align, bool* overflow) {
  const uint64_t rem = x % align;
  if (rem == 0) return x;
  uint64_t r = 0;
  *overflow = __builtin_add_overflow(x, align - rem, &r);
  return r;
}

}  // namespace

Expected<std::unique_ptr<File>> File::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    std::string m = path + ": " + std::strerror(e);
    return e == ENOENT ? Error::NotFound(m) : Error::Io(m);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return Error::Io(path + ": fstat: " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::InvalidArgument(path + ": not a regular file");
  }
  std::unique_ptr<File> f(new File());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      const int e = errno;
      ::close(fd);
      return Error::Io(path + ": mmap: " + std::strerror(e));
    }
    f->map_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
  Status s = f->Parse();
  if (!s.ok()) return Error{s.error().kind, path + ": " + s.error().message};
  return f;
}

Expected<std::unique_ptr<File>> File::FromBuffer(std::span<const uint8_t> bytes) {
  std::unique_ptr<File> f(new File());
  f->path_ = "<buffer>";
  f->owned_.assign(bytes.begin(), bytes.end());
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  REWIND_RETURN_IF_ERROR(f->Parse());
  return f;
}

File::~File() {
  if (map_) ::munmap(map_, size_);
}

Status File::Parse() {
  Cursor c(base_, size_);
  char magic[4];
  REWIND_RETURN_IF_ERROR(c.Bytes(magic, 4, "magic"));
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    return Error::Corrupt(Fmt("magic at offset 0: expected \"GGUF\", found %02x %02x %02x %02x",
                              static_cast<uint8_t>(magic[0]), static_cast<uint8_t>(magic[1]),
                              static_cast<uint8_t>(magic[2]), static_cast<uint8_t>(magic[3])));
  }
  REWIND_RETURN_IF_ERROR(c.Pod(&version_, "version"));
  if ((version_ & 0xFFFF) == 0) {
    return Error::Corrupt(Fmt("version at offset 4: %u looks byte-swapped (wrong endianness)", version_));
  }
  if (version_ != 2 && version_ != 3) {
    return Error::Unsupported(Fmt("version at offset 4: %u is not supported (2 or 3)", version_));
  }
  int64_t n_tensors = 0, n_kv = 0;
  REWIND_RETURN_IF_ERROR(c.Pod(&n_tensors, "n_tensors"));
  REWIND_RETURN_IF_ERROR(c.Pod(&n_kv, "n_kv"));
  // Each KV pair takes at least 8 (key length) + 1 (key) + 4 (type) + 1 (value) bytes; each tensor info at
  // least 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset).
  if (n_tensors < 0 || static_cast<uint64_t>(n_tensors) > c.remaining() / 24) {
    return Error::Corrupt(Fmt("n_tensors at offset 8: %" PRId64 " is negative or larger than the %" PRIu64
                              " bytes left allow",
                              n_tensors, c.remaining()));
  }
  if (n_kv < 0 || static_cast<uint64_t>(n_kv) > c.remaining() / 14) {
    return Error::Corrupt(Fmt("n_kv at offset 16: %" PRId64 " is negative or larger than the %" PRIu64
                              " bytes left allow",
                              n_kv, c.remaining()));
  }

  // Metadata.
  MetaParser mp(&c);
  kv_.reserve(static_cast<size_t>(n_kv));
  for (int64_t k = 0; k < n_kv; ++k) {
    const uint64_t at = c.pos();
    std::string key;
    REWIND_RETURN_IF_ERROR(c.String(&key, Fmt("key of KV pair %" PRId64, k)));
    if (key.empty())
      return Error::Corrupt(Fmt("key of KV pair %" PRId64 " at offset %" PRIu64 ": empty", k, at));
    const std::string what = "value of key '" + key + "'";
    if (kv_index_.count(key)) {
      return Error::Corrupt(Fmt("key '%s' at offset %" PRIu64 ": duplicate key", key.c_str(), at));
    }
    const uint64_t type_at = c.pos();
    uint32_t type = 0;
    REWIND_RETURN_IF_ERROR(c.Pod(&type, "type of key '" + key + "'"));
    if (!ValidValueType(type)) {
      return Error::Corrupt(
          Fmt("key '%s' at offset %" PRIu64 ": unknown value type %u", key.c_str(), type_at, type));
    }
    Value v;
    REWIND_RETURN_IF_ERROR(mp.ReadValue(static_cast<ValueType>(type), &v, what, 0));
    if (key == "general.alignment") {
      if (v.type != ValueType::kUint32) {
        return Error::Corrupt(Fmt("key 'general.alignment' at offset %" PRIu64 ": type %s, must be UINT32",
                                  at, ValueTypeName(v.type)));
      }
      if (v.u == 0 || (v.u & (v.u - 1)) != 0) {
        return Error::Corrupt(Fmt("key 'general.alignment' at offset %" PRIu64 ": %" PRIu64
                                  " is not a non-zero power of two",
                                  at, v.u));
      }
      alignment_ = v.u;
    }
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  // Tensor infos.
  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (int64_t t = 0; t < n_tensors; ++t) {
    const uint64_t at = c.pos();
    TensorInfo ti;
    REWIND_RETURN_IF_ERROR(c.String(&ti.name, Fmt("name of tensor %" PRId64, t), kMaxTensorName));
    const std::string where = Fmt("tensor '%s' info at offset %" PRIu64, ti.name.c_str(), at);
    if (tensor_index_.count(ti.name)) return Error::Corrupt(where + ": duplicate tensor name");
    REWIND_RETURN_IF_ERROR(c.Pod(&ti.n_dims, where + ": n_dims"));
    if (ti.n_dims > kMaxDims)
      return Error::Corrupt(Fmt("%s: n_dims %u > %u", where.c_str(), ti.n_dims, kMaxDims));
    for (uint32_t d = 0; d < ti.n_dims; ++d) {
      REWIND_RETURN_IF_ERROR(c.Pod(&ti.ne[d], where + Fmt(": ne[%u]", d)));
      if (ti.ne[d] < 0)
        return Error::Corrupt(Fmt("%s: ne[%u] = %" PRId64 " < 0", where.c_str(), d, ti.ne[d]));
    }
    uint32_t type_id = 0;
    REWIND_RETURN_IF_ERROR(c.Pod(&type_id, where + ": type"));
    const TypeInfo* info = GetTypeInfo(type_id);
    if (!info) return Error::Corrupt(Fmt("%s: unknown or removed tensor type id %u", where.c_str(), type_id));
    ti.type = static_cast<TensorType>(type_id);
    REWIND_RETURN_IF_ERROR(c.Pod(&ti.offset, where + ": offset"));
    if (ti.ne[0] % info->block_size != 0) {
      return Error::Corrupt(Fmt("%s: ne[0] = %" PRId64 " is not a multiple of the %s block size %" PRId64,
                                where.c_str(), ti.ne[0], info->name, info->block_size));
    }
    // nbytes = ne0/bs * type_size * ne1 * ne2 * ne3, overflow-checked (the element count too).
    int64_t elems = 1;
    uint64_t nbytes = static_cast<uint64_t>(ti.ne[0] / info->block_size);
    bool overflow = __builtin_mul_overflow(nbytes, static_cast<uint64_t>(info->block_bytes), &nbytes);
    for (int d = 0; d < 4; ++d) {
      overflow |= __builtin_mul_overflow(elems, ti.ne[d], &elems);
      if (d > 0) overflow |= __builtin_mul_overflow(nbytes, static_cast<uint64_t>(ti.ne[d]), &nbytes);
    }
    if (overflow) return Error::Corrupt(where + ": shape " + ti.ShapeString() + " overflows the byte size");
    ti.nbytes = nbytes;
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  // Data section.
  bool overflow = false;
  const uint64_t data_start = RoundUp(c.pos(), alignment_, &overflow);
  if (tensors_.empty()) {
    data_offset_ = std::min(data_start, size_);  // vocab-only files may end right after the metadata
    return Status::Ok();
  }
  if (overflow || data_start > size_) {
    return Error::Corrupt(Fmt("data section: starts at offset %" PRIu64 " (tensor infos end at %" PRIu64
                              ", alignment %" PRIu64 "), beyond the file size %" PRIu64,
                              data_start, c.pos(), alignment_, size_));
  }
  data_offset_ = data_start;
  const uint64_t data_size = size_ - data_start;
  std::vector<size_t> order(tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) {
    TensorInfo& ti = tensors_[k];
    order[k] = k;
    if (ti.offset % alignment_ != 0) {
      return Error::Corrupt(Fmt("tensor '%s': data offset %" PRIu64
                                " is not a multiple of the alignment %" PRIu64,
                                ti.name.c_str(), ti.offset, alignment_));
    }
    if (ti.offset > data_size || ti.nbytes > data_size - ti.offset) {
      return Error::Corrupt(Fmt("tensor '%s': data [%" PRIu64 ", +%" PRIu64 ") at file offset %" PRIu64
                                " runs past the end of the file (data section holds %" PRIu64 " bytes)",
                                ti.name.c_str(), ti.offset, ti.nbytes, data_start, data_size));
    }
    ti.data = base_ + data_start + ti.offset;
  }
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& prev = tensors_[order[k - 1]];
    const TensorInfo& cur = tensors_[order[k]];
    if (prev.nbytes > 0 && cur.offset < prev.offset + prev.nbytes) {
      return Error::Corrupt(Fmt("tensor '%s': data at offset %" PRIu64 " overlaps tensor '%s' [%" PRIu64
                                ", +%" PRIu64 ")",
                                cur.name.c_str(), cur.offset, prev.name.c_str(), prev.offset, prev.nbytes));
    }
  }
  return Status::Ok();
}

}  // namespace rw::gguf
