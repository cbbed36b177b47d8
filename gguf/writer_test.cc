// Writer tests: round trips through the reader, llama.cpp's strict offsets, deterministic bytes, misuse
// errors.
#include "gguf/writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "gguf/describe.h"

namespace rw::gguf {
namespace {

using ::testing::HasSubstr;

// A writer with every value type, a nested array, and three tensors of different types.
void Fill(Writer* w) {
  w->Set("general.architecture", MakeString("test"));
  w->Set("u8", MakeU8(250));
  w->Set("i8", MakeI8(-7));
  w->Set("u16", MakeU16(65535));
  w->Set("i16", MakeI16(-32768));
  w->SetU32("u32", 123456789);
  w->SetI32("i32", -123456789);
  w->Set("u64", MakeU64(uint64_t{1} << 63));
  w->Set("i64", MakeI64(-(int64_t{1} << 62)));
  w->SetF32("f32", 0.25f);
  w->Set("f64", MakeF64(-1e300));
  w->SetBool("bool", true);
  w->SetString("str", std::string("a\0b", 3));
  w->Set("strs", MakeStringArray({"x", "", "yz"}));
  w->Set("i32s", MakeI32Array({3, 3, 2, 0}));
  w->Set("bools", MakeBoolArray({true, false}));
  w->Set("f32s", MakeF32Array({1.5f, -2.f}));
  w->Set("nested", MakeArray(ValueType::kArray, {MakeI32Array({1}), MakeI32Array({2, 3})}));
  ASSERT_TRUE(w->AddTensor("a", TensorType::kF32, {3, 2}).ok());
  ASSERT_TRUE(w->AddTensor("b", TensorType::kQ8_0, {64}).ok());
  ASSERT_TRUE(w->AddTensor("c", TensorType::kF16, {5}).ok());
}

Status WriteData(Writer* w) {
  float a[6] = {1, 2, 3, 4, 5, 6};
  std::vector<uint8_t> b(68);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(i * 7);
  uint16_t c[5] = {1, 2, 3, 4, 5};
  REWIND_RETURN_IF_ERROR(w->WriteTensor("a", a, sizeof a));
  REWIND_RETURN_IF_ERROR(w->WriteTensorChunk("b", b.data(), 10));
  REWIND_RETURN_IF_ERROR(w->WriteTensorChunk("b", b.data() + 10, 58));
  REWIND_RETURN_IF_ERROR(w->WriteTensor("c", c, sizeof c));
  return w->Close();
}

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensor) {
  Writer w;
  Fill(&w);
  std::vector<uint8_t> out;
  ASSERT_TRUE(w.OpenBuffer(&out).ok());
  ASSERT_TRUE(WriteData(&w).ok());
  EXPECT_EQ(out.size(), w.FileSize());
  auto f = File::FromBuffer(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const File& r = **f;
  EXPECT_EQ(r.version(), 3u);
  ASSERT_EQ(r.metadata().size(), w.metadata().size());
  for (size_t i = 0; i < r.metadata().size(); ++i) EXPECT_EQ(r.metadata()[i].first, w.metadata()[i].first);
  EXPECT_EQ(r.Find("u8")->u, 250u);
  EXPECT_EQ(r.Find("i8")->i, -7);
  EXPECT_EQ(r.Find("u16")->u, 65535u);
  EXPECT_EQ(r.Find("i16")->i, -32768);
  EXPECT_EQ(*r.GetU32("u32"), 123456789u);
  EXPECT_EQ(*r.GetI32("i32"), -123456789);
  EXPECT_EQ(*r.GetU64("u64"), uint64_t{1} << 63);
  EXPECT_EQ(r.Find("i64")->i, -(int64_t{1} << 62));
  EXPECT_EQ(*r.GetF32("f32"), 0.25f);
  EXPECT_EQ(r.Find("f64")->f, -1e300);
  EXPECT_TRUE(*r.GetBool("bool"));
  EXPECT_EQ(*r.GetString("str"), std::string("a\0b", 3));
  EXPECT_EQ(*r.GetStringArray("strs"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(*r.GetIntArray("i32s"), (std::vector<int64_t>{3, 3, 2, 0}));
  EXPECT_EQ(r.Find("bools")->array[1].u, 0u);
  EXPECT_EQ(*r.GetF32Array("f32s"), (std::vector<float>{1.5f, -2.f}));
  EXPECT_EQ(r.Find("nested")->array[1].array[1].i, 3);

  ASSERT_EQ(r.tensors().size(), 3u);
  const TensorInfo* a = r.FindTensor("a");
  EXPECT_EQ(a->ShapeString(), "{3, 2}");
  float av[6];
  std::memcpy(av, a->data, sizeof av);
  EXPECT_EQ(av[5], 6.f);
  EXPECT_EQ(r.FindTensor("b")->data[67], static_cast<uint8_t>(67 * 7));
  EXPECT_EQ(r.FindTensor("c")->nbytes, 10u);
}

TEST(GgufWriter, UsesLlamaCppStrictOffsets) {
  Writer w;
  w.SetU32("general.alignment", 64);
  ASSERT_TRUE(w.AddTensor("t0", TensorType::kF32, {3}).ok());       // 12 bytes -> next at 64
  ASSERT_TRUE(w.AddTensor("t1", TensorType::kQ8_0, {32, 3}).ok());  // 102 bytes -> next at 64 + 128
  ASSERT_TRUE(w.AddTensor("t2", TensorType::kF32, {16}).ok());      // 64 bytes
  EXPECT_EQ(w.tensors()[0].offset, 0u);
  EXPECT_EQ(w.tensors()[1].offset, 64u);
  EXPECT_EQ(w.tensors()[2].offset, 192u);
  std::vector<uint8_t> out;
  ASSERT_TRUE(w.OpenBuffer(&out).ok());
  std::vector<uint8_t> zeros(200);
  ASSERT_TRUE(w.WriteTensor("t0", zeros.data(), 12).ok());
  ASSERT_TRUE(w.WriteTensor("t1", zeros.data(), 102).ok());
  ASSERT_TRUE(w.WriteTensor("t2", zeros.data(), 64).ok());
  ASSERT_TRUE(w.Close().ok());
  auto f = File::FromBuffer(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ((*f)->alignment(), 64u);
  EXPECT_EQ((*f)->data_offset() % 64, 0u);
  EXPECT_EQ(out.size(), (*f)->data_offset() + 256);  // every tensor padded, the last one too
  EXPECT_EQ((*f)->tensors()[2].offset, 192u);
}

TEST(GgufWriter, WritesIdenticalBytesForIdenticalCallsToFileAndBuffer) {
  Writer w1, w2;
  Fill(&w1);
  Fill(&w2);
  std::vector<uint8_t> out;
  ASSERT_TRUE(w1.OpenBuffer(&out).ok());
  ASSERT_TRUE(WriteData(&w1).ok());
  const std::string path = ::testing::TempDir() + "/writer_test_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(w2.Open(path).ok());
  ASSERT_TRUE(WriteData(&w2).ok());
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  ASSERT_EQ((*f)->file_size(), out.size());
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  std::vector<uint8_t> disk(out.size());
  ASSERT_EQ(std::fread(disk.data(), 1, disk.size(), fp), disk.size());
  std::fclose(fp);
  std::remove(path.c_str());
  EXPECT_EQ(disk, out);
}

TEST(GgufWriter, ReplacesAnExistingKeyInPlace) {
  Writer w;
  w.SetU32("a", 1);
  w.SetU32("b", 2);
  w.SetString("a", "x");
  ASSERT_EQ(w.metadata().size(), 2u);
  EXPECT_EQ(w.metadata()[0].first, "a");
  EXPECT_EQ(w.metadata()[0].second.s, "x");
}

TEST(GgufWriter, RejectsBadTensorDeclarations) {
  Writer w;
  ASSERT_TRUE(w.AddTensor("x", TensorType::kF32, {4}).ok());
  EXPECT_THAT(w.AddTensor("x", TensorType::kF32, {4}).error().message, HasSubstr("duplicate"));
  EXPECT_THAT(w.AddTensor(std::string(64, 'n'), TensorType::kF32, {4}).error().message, HasSubstr("63"));
  EXPECT_THAT(w.AddTensor("q", TensorType::kQ4_K, {128}).error().message, HasSubstr("block size 256"));
  EXPECT_FALSE(w.AddTensor("d", TensorType::kF32, {1, 1, 1, 1, 1}).ok());
  EXPECT_FALSE(w.AddTensor("n", TensorType::kF32, {-1}).ok());
  EXPECT_FALSE(w.AddTensor("o", TensorType::kF32, {int64_t{1} << 40, int64_t{1} << 40}).ok());
  EXPECT_FALSE(w.AddTensor("u", static_cast<TensorType>(4), {32}).ok());
}

TEST(GgufWriter, RejectsOutOfOrderWrongSizedAndMissingTensorData) {
  Writer w;
  ASSERT_TRUE(w.AddTensor("a", TensorType::kF32, {2}).ok());
  ASSERT_TRUE(w.AddTensor("b", TensorType::kF32, {2}).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(w.OpenBuffer(&out).ok());
  float v[4] = {};
  EXPECT_THAT(w.WriteTensor("b", v, 8).error().message, HasSubstr("out of order"));
  EXPECT_THAT(w.WriteTensor("a", v, 12).error().message, HasSubstr("size is 8"));
  ASSERT_TRUE(w.WriteTensor("a", v, 8).ok());
  EXPECT_THAT(w.Close().error().message, HasSubstr("'b' was not written"));
}

TEST(GgufWriter, WritesAMetadataOnlyFileWithoutPadding) {
  Writer w;
  w.SetString("tokenizer.ggml.model", "gpt2");
  std::vector<uint8_t> out;
  ASSERT_TRUE(w.OpenBuffer(&out).ok());
  ASSERT_TRUE(w.Close().ok());
  EXPECT_EQ(out.size(), w.FileSize());
  EXPECT_EQ(out.size(), 24u + 8 + 20 + 4 + 8 + 4);
  auto f = File::FromBuffer(out);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(*(*f)->GetString("tokenizer.ggml.model"), "gpt2");
}

}  // namespace
}  // namespace rw::gguf

namespace rw::gguf {
namespace {

TEST(GgufDescribe, TotalsByTypeSumsTensorsAndBytesPerTypeInTypeIdOrder) {
  Writer w;
  ASSERT_TRUE(w.AddTensor("e", TensorType::kQ6_K, {256, 2}).ok());
  ASSERT_TRUE(w.AddTensor("a", TensorType::kIQ2_XXS, {256, 3}).ok());
  ASSERT_TRUE(w.AddTensor("n", TensorType::kF32, {7}).ok());
  ASSERT_TRUE(w.AddTensor("b", TensorType::kIQ2_XXS, {512}).ok());
  const std::string path = ::testing::TempDir() + "/describe_test_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(w.Open(path).ok());
  for (const auto& t : std::vector<TensorInfo>(w.tensors())) {
    std::vector<uint8_t> zeros(t.nbytes);
    ASSERT_TRUE(w.WriteTensor(t.name, zeros.data(), zeros.size()).ok());
  }
  ASSERT_TRUE(w.Close().ok());
  auto f = File::Open(path);
  ASSERT_TRUE(f.ok()) << f.error().message;
  const auto totals = TotalsByType(**f);
  std::remove(path.c_str());
  ASSERT_EQ(totals.size(), 3u);
  EXPECT_EQ(totals[0].type, TensorType::kF32);
  EXPECT_EQ(totals[0].bytes, 28u);
  EXPECT_EQ(totals[1].type, TensorType::kQ6_K);
  EXPECT_EQ(totals[1].bytes, 2u * 210);
  EXPECT_EQ(totals[2].type, TensorType::kIQ2_XXS);
  EXPECT_EQ(totals[2].tensors, 2);
  EXPECT_EQ(totals[2].elements, 5 * 256);
  EXPECT_EQ(totals[2].bytes, 5u * 66);
}

}  // namespace
}  // namespace rw::gguf
