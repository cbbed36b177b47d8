#include "memory/persist_format.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "base/file.h"
#include "base/hash.h"

namespace rw::memory {
namespace {

constexpr uint64_t kModel = 0x1234abcdull;
const CheckpointKey kKey{kModel, "q8_0/f16"};

struct Sample {
  std::vector<int32_t> tokens = {5, 6, 7, 8, 9};
  std::vector<std::byte> state, page0, page1;
  Sample() {
    for (int i = 0; i < 40; ++i) state.push_back(std::byte(i * 3));
    for (int i = 0; i < 16; ++i) page0.push_back(std::byte(100 + i));
    for (int i = 0; i < 16; ++i) page1.push_back(std::byte(200 + i));
  }
  std::string Encode() const {
    std::vector<std::span<const std::byte>> kv = {page0, page1};
    return EncodeCheckpointFile(kKey, tokens, state, kv);
  }
};

TEST(PersistFormat, RoundTripsTokensStateAndPages) {
  Sample s;
  auto f = DecodeCheckpointFile(s.Encode(), kKey);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tokens, s.tokens);
  EXPECT_EQ(f->prefix_hash, HashTokens(s.tokens));
  ASSERT_EQ(f->state.size(), 40u);
  EXPECT_EQ(std::memcmp(f->state.data(), s.state.data(), 40), 0);
  ASSERT_EQ(f->kv.size(), 32u);
  EXPECT_EQ(std::memcmp(f->kv.data() + 16, s.page1.data(), 16), 0);
}

TEST(PersistFormat, RejectsEveryFlippedByte) {
  Sample s;
  const std::string good = s.Encode();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x40);
    auto f = DecodeCheckpointFile(bad, kKey);
    EXPECT_FALSE(f.ok()) << "byte " << i << " flipped was accepted";
  }
}

TEST(PersistFormat, RejectsEveryTruncationAndTrailingBytes) {
  Sample s;
  const std::string good = s.Encode();
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = DecodeCheckpointFile(std::string_view(good).substr(0, n), kKey);
    ASSERT_FALSE(f.ok()) << "truncated to " << n;
    EXPECT_EQ(f.error().kind, ErrorKind::kCorrupt);
  }
  EXPECT_FALSE(DecodeCheckpointFile(good + "x", kKey).ok());
}

TEST(PersistFormat, RejectsAForeignModelWithAClearError) {
  Sample s;
  auto f = DecodeCheckpointFile(s.Encode(), {kModel + 1, kKey.kv_type});
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.error().kind, ErrorKind::kUnsupported);
  EXPECT_NE(f.error().message.find("another model"), std::string::npos) << f.error().message;
}

TEST(PersistFormat, RejectsOtherVersions) {
  Sample s;
  std::string b = s.Encode();
  for (char v : {1, 3}) {  // 1: the format before KV types were recorded
    b[8] = v;
    auto f = DecodeCheckpointFile(b, kKey);
    ASSERT_FALSE(f.ok());
    EXPECT_EQ(f.error().kind, ErrorKind::kUnsupported);
    EXPECT_NE(f.error().message.find("version " + std::to_string(v)), std::string::npos) << f.error().message;
  }
}

TEST(PersistFormat, RecordsTheKvTypesAndRefusesAFileOfOtherTypesNamingBoth) {
  Sample s;
  auto f = DecodeCheckpointFile(s.Encode(), kKey);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->kv_type, "q8_0/f16");
  for (std::string_view other : {"f16", "q8_0", "q8_0/f32", "iq4_nl"}) {
    auto g = DecodeCheckpointFile(s.Encode(), {kModel, other});
    ASSERT_FALSE(g.ok()) << other;
    EXPECT_EQ(g.error().kind, ErrorKind::kUnsupported);
    EXPECT_NE(g.error().message.find("KV cache of type q8_0/f16, this cache is " + std::string(other)),
              std::string::npos)
        << g.error().message;
  }
}

TEST(PersistFormat, FilesAreWrittenAtomicallyAndReadBack) {
  Sample s;
  std::string dir = ::testing::TempDir() + "/rewind_persist_" + std::to_string(getpid());
  ASSERT_TRUE(MakeDirs(dir).ok());
  std::vector<std::span<const std::byte>> kv = {s.page0, s.page1};
  ASSERT_TRUE(WriteCheckpointFile(dir + "/c0.rwck", kKey, s.tokens, s.state, kv).ok());
  auto f = ReadCheckpointFile(dir + "/c0.rwck", kKey);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->tokens, s.tokens);
  auto missing = ReadCheckpointFile(dir + "/nope.rwck", kKey);
  EXPECT_FALSE(missing.ok());

  std::vector<CheckpointIndexEntry> idx = {{"c0.rwck", 5, HashTokens(s.tokens), 123}, {"c1.rwck", 9, 77, 456}};
  ASSERT_TRUE(WriteCheckpointIndex(dir + "/index", kModel, idx).ok());
  auto back = ReadCheckpointIndex(dir + "/index", kModel);
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[1].file, "c1.rwck");
  EXPECT_EQ((*back)[1].pos, 9);
  EXPECT_EQ((*back)[1].bytes, 456u);
}

TEST(PersistFormat, IndexRejectsCorruptionForeignModelsAndEscapingNames) {
  std::vector<CheckpointIndexEntry> idx = {{"c0.rwck", 5, 1, 2}};
  std::string good = EncodeCheckpointIndex(kModel, idx);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 1);
    EXPECT_FALSE(DecodeCheckpointIndex(bad, kModel).ok()) << "byte " << i;
  }
  for (size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(DecodeCheckpointIndex(good.substr(0, n), kModel).ok());
  EXPECT_EQ(DecodeCheckpointIndex(good, kModel + 1).error().kind, ErrorKind::kUnsupported);
  std::vector<CheckpointIndexEntry> evil = {{"../etc", 5, 1, 2}};
  EXPECT_FALSE(DecodeCheckpointIndex(EncodeCheckpointIndex(kModel, evil), kModel).ok());
}

}  // namespace
}  // namespace rw::memory
