// Reader tests over hand-made files: valid v2/v3 files with every value type, and corrupt ones that must give
// an Error (never a crash), including every truncation of a small valid file.
#include "gguf/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace rw::gguf {
namespace {

using ::testing::HasSubstr;

// Tiny little-endian byte builder.
struct Bytes {
  std::vector<uint8_t> b;
  template <typename T>
  Bytes& Pod(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  Bytes& U8(uint8_t v) { return Pod(v); }
  Bytes& U32(uint32_t v) { return Pod(v); }
  Bytes& U64(uint64_t v) { return Pod(v); }
  Bytes& I64(int64_t v) { return Pod(v); }
  Bytes& Str(const std::string& s) {
    U64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& Header(uint32_t version, int64_t n_tensors, int64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return U32(version).I64(n_tensors).I64(n_kv);
  }
  Bytes& Key(const std::string& k, ValueType t) { return Str(k).U32(static_cast<uint32_t>(t)); }
  Bytes& TensorInfo(const std::string& name, std::vector<int64_t> ne, TensorType type, uint64_t offset) {
    Str(name).U32(static_cast<uint32_t>(ne.size()));
    for (int64_t n : ne) I64(n);
    return U32(static_cast<uint32_t>(type)).U64(offset);
  }
  Bytes& PadTo(uint64_t align) {
    while (b.size() % align) b.push_back(0);
    return *this;
  }
  std::span<const uint8_t> span() const { return b; }
};

Expected<std::unique_ptr<File>> Parse(const Bytes& bytes) { return File::FromBuffer(bytes.span()); }

std::string ErrorOf(const Bytes& bytes) {
  auto f = Parse(bytes);
  if (f.ok()) return "<no error>";
  return f.error().message;
}

// A valid file with one key of every scalar type, a string, arrays and two tensors (sizes multiples of 32 so
// the file ends exactly at the end of the last tensor: every strict prefix is invalid).
Bytes SmallValidFile(uint32_t version = 3) {
  Bytes w;
  w.Header(version, 2, 15);
  w.Key("k.u8", ValueType::kUint8).U8(200);
  w.Key("k.i8", ValueType::kInt8).Pod<int8_t>(-100);
  w.Key("k.u16", ValueType::kUint16).Pod<uint16_t>(60000);
  w.Key("k.i16", ValueType::kInt16).Pod<int16_t>(-30000);
  w.Key("k.u32", ValueType::kUint32).U32(4000000000u);
  w.Key("k.i32", ValueType::kInt32).Pod<int32_t>(-2000000000);
  w.Key("k.f32", ValueType::kFloat32).Pod<float>(1.5f);
  w.Key("k.bool", ValueType::kBool).U8(1);
  w.Key("k.str", ValueType::kString).Str("hello");
  w.Key("k.u64", ValueType::kUint64).U64(0xFFFFFFFFFFFFFFFFull);
  w.Key("k.i64", ValueType::kInt64).I64(-5);
  w.Key("k.f64", ValueType::kFloat64).Pod<double>(0.1);
  w.Key("k.arr_i32", ValueType::kArray).U32(5).U64(3).Pod<int32_t>(1).Pod<int32_t>(-2).Pod<int32_t>(3);
  w.Key("k.arr_str", ValueType::kArray).U32(8).U64(2).Str("a").Str("bc");
  // Nested: array of 2 arrays of u8.
  w.Key("k.nested", ValueType::kArray).U32(9).U64(2).U32(0).U64(1).U8(7).U32(0).U64(2).U8(8).U8(9);
  w.TensorInfo("t.f32", {8, 2}, TensorType::kF32, 0);    // 64 bytes
  w.TensorInfo("t.q8", {32, 1}, TensorType::kQ8_0, 64);  // 34 bytes -> ends at 98
  w.PadTo(32);
  for (int i = 0; i < 16; ++i) w.Pod<float>(static_cast<float>(i));
  for (int i = 0; i < 34; ++i) w.U8(static_cast<uint8_t>(i));
  return w;
}

TEST(GgufReader, ReadsEveryValueTypeOfAValidV3File) {
  auto f = Parse(SmallValidFile(3));
  ASSERT_TRUE(f.ok()) << f.error().message;
  const File& file = **f;
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.metadata().size(), 15u);
  EXPECT_EQ(file.metadata()[0].first, "k.u8");
  EXPECT_EQ(file.Find("k.u8")->u, 200u);
  EXPECT_EQ(file.Find("k.i8")->i, -100);
  EXPECT_EQ(file.Find("k.u16")->u, 60000u);
  EXPECT_EQ(file.Find("k.i16")->i, -30000);
  EXPECT_EQ(*file.GetU32("k.u32"), 4000000000u);
  EXPECT_EQ(*file.GetI32("k.i32"), -2000000000);
  EXPECT_EQ(*file.GetF32("k.f32"), 1.5f);
  EXPECT_EQ(*file.GetBool("k.bool"), true);
  EXPECT_EQ(*file.GetString("k.str"), "hello");
  EXPECT_EQ(*file.GetU64("k.u64"), 0xFFFFFFFFFFFFFFFFull);
  EXPECT_EQ(file.Find("k.i64")->i, -5);
  EXPECT_EQ(file.Find("k.f64")->f, 0.1);
  EXPECT_EQ(*file.GetIntArray("k.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*file.GetF32Array("k.arr_i32"), (std::vector<float>{1, -2, 3}));
  EXPECT_EQ(*file.GetStringArray("k.arr_str"), (std::vector<std::string>{"a", "bc"}));
  const Value* nested = file.Find("k.nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->elem_type, ValueType::kArray);
  ASSERT_EQ(nested->array.size(), 2u);
  EXPECT_EQ(nested->array[0].array.size(), 1u);
  EXPECT_EQ(nested->array[0].array[0].u, 7u);
  EXPECT_EQ(nested->array[1].array[1].u, 9u);
  EXPECT_EQ(file.Find("missing"), nullptr);
}

TEST(GgufReader, LocatesTensorDataAtTheAlignedDataSection) {
  auto f = Parse(SmallValidFile());
  ASSERT_TRUE(f.ok()) << f.error().message;
  const File& file = **f;
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_EQ(file.data_offset() % 32, 0u);
  ASSERT_EQ(file.tensors().size(), 2u);
  const TensorInfo* t = file.FindTensor("t.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->n_dims, 2u);
  EXPECT_EQ(t->ShapeString(), "{8, 2}");
  EXPECT_EQ(t->nbytes, 64u);
  EXPECT_EQ(t->row_bytes(), 32u);
  EXPECT_EQ(t->n_elements(), 16);
  float v[16];
  std::memcpy(v, t->data, sizeof v);
  EXPECT_EQ(v[0], 0.f);
  EXPECT_EQ(v[15], 15.f);
  const TensorInfo* q = file.FindTensor("t.q8");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, TensorType::kQ8_0);
  EXPECT_EQ(q->nbytes, 34u);
  EXPECT_EQ(q->data[33], 33);
  EXPECT_EQ(q->data, t->data + 64);
  EXPECT_EQ(file.FindTensor("nope"), nullptr);
}

TEST(GgufReader, AcceptsVersion2) {
  auto f = Parse(SmallValidFile(2));
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->version(), 2u);
}

TEST(GgufReader, HonoursGeneralAlignment) {
  Bytes w;
  w.Header(3, 2, 1);
  w.Key("general.alignment", ValueType::kUint32).U32(256);
  w.TensorInfo("a", {4}, TensorType::kF32, 0);
  w.TensorInfo("b", {4}, TensorType::kF32, 256);
  w.PadTo(256);
  for (int i = 0; i < 64 + 4; ++i) w.Pod<float>(static_cast<float>(i));
  auto f = Parse(w);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->alignment(), 256u);
  EXPECT_EQ((*f)->data_offset(), 256u);
  float b0 = 0;
  std::memcpy(&b0, (*f)->FindTensor("b")->data, 4);
  EXPECT_EQ(b0, 64.f);
}

TEST(GgufReader, OpensAFileWithoutTensorsEndingAfterTheMetadata) {
  Bytes w;
  w.Header(3, 0, 1);
  w.Key("tokenizer.ggml.model", ValueType::kString).Str("gpt2");
  auto f = Parse(w);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_TRUE((*f)->tensors().empty());
}

TEST(GgufReader, TypedGettersRequireTheStoredType) {
  auto f = Parse(SmallValidFile());
  ASSERT_TRUE(f.ok());
  auto u = (*f)->GetU32("k.i32");
  ASSERT_FALSE(u.ok());
  EXPECT_THAT(u.error().message, HasSubstr("INT32"));
  EXPECT_THAT(u.error().message, HasSubstr("UINT32"));
  EXPECT_FALSE((*f)->GetString("k.u8").ok());
  EXPECT_FALSE((*f)->GetStringArray("k.arr_i32").ok());
  EXPECT_FALSE((*f)->GetIntArray("k.arr_str").ok());
  EXPECT_EQ((*f)->GetU32("missing").error().kind, ErrorKind::kNotFound);
}

TEST(GgufReader, RejectsBadMagic) {
  Bytes w = SmallValidFile();
  w.b[0] = 'X';
  EXPECT_THAT(ErrorOf(w), HasSubstr("magic"));
}

TEST(GgufReader, RejectsUnsupportedAndByteSwappedVersions) {
  for (uint32_t v : {0u, 1u, 4u, 0x03000000u}) {
    Bytes w = SmallValidFile();
    std::memcpy(&w.b[4], &v, 4);
    EXPECT_THAT(ErrorOf(w), HasSubstr("version")) << v;
  }
  Bytes w = SmallValidFile();
  const uint32_t swapped = 0x03000000u;
  std::memcpy(&w.b[4], &swapped, 4);
  EXPECT_THAT(ErrorOf(w), HasSubstr("endianness"));
}

TEST(GgufReader, RejectsEveryTruncationOfAValidFile) {
  const Bytes full = SmallValidFile();
  ASSERT_TRUE(Parse(full).ok());
  for (size_t n = 0; n < full.b.size(); ++n) {
    Bytes cut;
    cut.b.assign(full.b.begin(), full.b.begin() + n);
    EXPECT_FALSE(Parse(cut).ok()) << "prefix of " << n << " bytes parsed";
  }
}

TEST(GgufReader, SurvivesRandomByteCorruption) {
  const Bytes full = SmallValidFile();
  std::mt19937_64 rng(1234);
  int errors = 0;
  for (int it = 0; it < 5000; ++it) {
    Bytes w = full;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) w.b[rng() % w.b.size()] = static_cast<uint8_t>(rng());
    auto f = Parse(w);  // must return, value or error
    if (!f.ok()) {
      ++errors;
      EXPECT_FALSE(f.error().message.empty());
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(GgufReader, RejectsHugeCounts) {
  {
    Bytes w;
    w.Header(3, 0, int64_t{1} << 62);
    EXPECT_THAT(ErrorOf(w), HasSubstr("n_kv"));
  }
  {
    Bytes w;
    w.Header(3, -1, 0);
    EXPECT_THAT(ErrorOf(w), HasSubstr("n_tensors"));
  }
  {
    Bytes w;
    w.Header(3, 0, -3);
    EXPECT_THAT(ErrorOf(w), HasSubstr("n_kv"));
  }
  {
    Bytes w;
    w.Header(3, 0, 1).Key("big", ValueType::kArray).U32(0).U64(uint64_t{1} << 60).U8(1);
    EXPECT_THAT(ErrorOf(w), HasSubstr("array count"));
  }
  {
    Bytes w;  // 2^61 strings of >= 8 bytes each: the multiply would overflow
    w.Header(3, 0, 1).Key("big", ValueType::kArray).U32(8).U64(uint64_t{1} << 61);
    EXPECT_THAT(ErrorOf(w), HasSubstr("array count"));
  }
}

TEST(GgufReader, RejectsStringLengthsBeyondTheFile) {
  {
    Bytes w;
    w.Header(3, 0, 1).U64(0xFFFFFFFFFFFFFFFFull).U8('k').U64(0).U64(0);
    EXPECT_THAT(ErrorOf(w), HasSubstr("key of KV pair 0"));
  }
  {
    Bytes w;
    w.Header(3, 0, 1).Key("s", ValueType::kString).U64(0xFFFFFFFFFFFFFFF0ull).U8('x').U64(0);
    EXPECT_THAT(ErrorOf(w), HasSubstr("value of key 's'"));
  }
  {
    Bytes w;  // tensor name longer than 63 bytes
    w.Header(3, 1, 0).TensorInfo(std::string(64, 'n'), {4}, TensorType::kF32, 0).PadTo(32);
    for (int i = 0; i < 4; ++i) w.Pod<float>(0);
    EXPECT_THAT(ErrorOf(w), HasSubstr("length 64 > 63"));
  }
}

TEST(GgufReader, RejectsTensorDataPastTheEnd) {
  Bytes w;
  w.Header(3, 1, 0).TensorInfo("blk.0.x", {8}, TensorType::kF32, 32).PadTo(32);
  for (int i = 0; i < 8; ++i) w.Pod<float>(0);
  EXPECT_THAT(ErrorOf(w), HasSubstr("tensor 'blk.0.x'"));
  EXPECT_THAT(ErrorOf(w), HasSubstr("past the end"));
}

TEST(GgufReader, RejectsByteSizeOverflow) {
  Bytes w;
  w.Header(3, 1, 0).TensorInfo("huge", {int64_t{1} << 40, int64_t{1} << 40}, TensorType::kF32, 0).PadTo(32);
  EXPECT_THAT(ErrorOf(w), HasSubstr("overflows"));
  Bytes w2;
  w2.Header(3, 1, 0).TensorInfo("neg", {4, -1}, TensorType::kF32, 0).PadTo(32);
  EXPECT_THAT(ErrorOf(w2), HasSubstr("< 0"));
}

TEST(GgufReader, RejectsDuplicateKeysAndTensorNames) {
  Bytes w;
  w.Header(3, 0, 2).Key("a", ValueType::kUint8).U8(1).Key("a", ValueType::kUint8).U8(2);
  EXPECT_THAT(ErrorOf(w), HasSubstr("duplicate key"));
  Bytes t;
  t.Header(3, 2, 0)
      .TensorInfo("x", {8}, TensorType::kF32, 0)
      .TensorInfo("x", {8}, TensorType::kF32, 32)
      .PadTo(32);
  for (int i = 0; i < 16; ++i) t.Pod<float>(0);
  EXPECT_THAT(ErrorOf(t), HasSubstr("duplicate tensor name"));
}

TEST(GgufReader, RejectsBadAlignmentTypeAndValue) {
  Bytes w;
  w.Header(3, 0, 1).Key("general.alignment", ValueType::kUint64).U64(32);
  EXPECT_THAT(ErrorOf(w), HasSubstr("must be UINT32"));
  for (uint32_t a : {0u, 3u, 48u}) {
    Bytes v;
    v.Header(3, 0, 1).Key("general.alignment", ValueType::kUint32).U32(a);
    EXPECT_THAT(ErrorOf(v), HasSubstr("power of two")) << a;
  }
}

TEST(GgufReader, RejectsUnknownAndRemovedTypeIdsNamingTheTensor) {
  for (uint32_t id : {4u, 5u, 31u, 33u, 36u, 38u, 43u, 1000u}) {
    Bytes w;
    w.Header(3, 1, 0).TensorInfo("blk.3.w", {32}, static_cast<TensorType>(id), 0).PadTo(32);
    for (int i = 0; i < 64; ++i) w.Pod<float>(0);
    const std::string e = ErrorOf(w);
    EXPECT_THAT(e, HasSubstr("'blk.3.w'")) << id;
    EXPECT_THAT(e, HasSubstr("type id " + std::to_string(id))) << id;
  }
  Bytes v;
  v.Header(3, 0, 1).Key("k", static_cast<ValueType>(13)).U8(0);
  EXPECT_THAT(ErrorOf(v), HasSubstr("unknown value type 13"));
}

TEST(GgufReader, RejectsMoreThanFourDimensionsWithFieldAndOffset) {
  Bytes w;
  w.Header(3, 1, 0).TensorInfo("blk.0.x", {1, 1, 1, 1, 1, 1, 1}, TensorType::kF32, 0);
  EXPECT_EQ(ErrorOf(w), "tensor 'blk.0.x' info at offset 24: n_dims 7 > 4");
}

TEST(GgufReader, RejectsRowsThatAreNotWholeBlocks) {
  Bytes w;
  w.Header(3, 1, 0).TensorInfo("q", {48}, TensorType::kQ8_0, 0).PadTo(32);
  for (int i = 0; i < 64; ++i) w.U8(0);
  EXPECT_THAT(ErrorOf(w), HasSubstr("not a multiple of the Q8_0 block size 32"));
}

TEST(GgufReader, RejectsOverlappingAndMisalignedTensorData) {
  Bytes w;
  w.Header(3, 2, 0).TensorInfo("a", {16}, TensorType::kF32, 0).TensorInfo("b", {16}, TensorType::kF32, 32);
  w.PadTo(32);
  for (int i = 0; i < 32; ++i) w.Pod<float>(0);
  EXPECT_THAT(ErrorOf(w), HasSubstr("overlaps"));
  Bytes m;
  m.Header(3, 1, 0).TensorInfo("a", {4}, TensorType::kF32, 4).PadTo(32);
  for (int i = 0; i < 16; ++i) m.Pod<float>(0);
  EXPECT_THAT(ErrorOf(m), HasSubstr("not a multiple of the alignment"));
}

TEST(GgufReader, RejectsArraysNestedTooDeeply) {
  Bytes w;
  w.Header(3, 0, 1).Key("deep", ValueType::kArray);
  for (int i = 0; i < 20; ++i) w.U32(9).U64(1);
  w.U32(0).U64(0);
  EXPECT_THAT(ErrorOf(w), HasSubstr("nested deeper"));
}

TEST(GgufReader, FingerprintDependsOnMetadataAndLayoutOnly) {
  const Bytes a = SmallValidFile();
  Bytes data_changed = a;
  data_changed.b[data_changed.b.size() - 1] ^= 0xFF;
  Bytes meta_changed = a;
  // "hello" -> "hellp"
  auto pos =
      std::search(meta_changed.b.begin(), meta_changed.b.end(), std::begin("hello"), std::end("hello") - 1);
  ASSERT_NE(pos, meta_changed.b.end());
  pos[4] = 'p';
  const uint64_t fa = (*Parse(a))->Fingerprint();
  EXPECT_EQ(fa, (*Parse(a))->Fingerprint());
  EXPECT_EQ(fa, (*Parse(data_changed))->Fingerprint());
  EXPECT_NE(fa, (*Parse(meta_changed))->Fingerprint());
}

TEST(GgufReader, OpensFilesThroughMmap) {
  const Bytes w = SmallValidFile();
  const std::string path = ::testing::TempDir() + "/gguf_test_" + std::to_string(::getpid()) + ".gguf";
  FILE* fp = std::fopen(path.c_str(), "wb");
  ASSERT_NE(fp, nullptr);
  std::fwrite(w.b.data(), 1, w.b.size(), fp);
  std::fclose(fp);
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->file_size(), w.b.size());
  EXPECT_EQ((*f)->path(), path);
  EXPECT_EQ((*f)->FindTensor("t.q8")->data[5], 5);
  std::remove(path.c_str());
  auto missing = File::Open(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::kNotFound);
}

TEST(GgufTypes, KnowsBlockSizesAndRejectsRemovedIds) {
  EXPECT_EQ(GetTypeInfo(TensorType::kQ4_K)->block_bytes, 144);
  EXPECT_EQ(GetTypeInfo(TensorType::kQ6_K)->block_size, 256);
  EXPECT_STREQ(TypeName(TensorType::kBF16), "BF16");
  EXPECT_STREQ(GetTypeInfo(42u)->name, "Q2_0");
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u}) EXPECT_EQ(GetTypeInfo(id), nullptr) << id;
}

}  // namespace
}  // namespace rw::gguf
