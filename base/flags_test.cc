#include "base/flags.h"

#include <gtest/gtest.h>

namespace rw {
namespace {

TEST(FlagSet, ParsesLongShortAndPositional) {
  std::string model;
  int n = 16;
  bool verbose = false;
  std::string file;
  FlagSet f("rewind x", "test");
  f.Add("model", 'm', &model, "model");
  f.Add("n-predict", 'n', &n, "tokens");
  f.Add("verbose", 0, &verbose, "verbose");
  f.Positional("FILE", &file, "file", true);
  const char* argv[] = {"x", "-m", "a.gguf", "--n-predict=5", "--verbose", "in.txt"};
  ASSERT_TRUE(f.Parse(6, const_cast<char**>(argv)).ok());
  EXPECT_EQ(model, "a.gguf");
  EXPECT_EQ(n, 5);
  EXPECT_TRUE(verbose);
  EXPECT_EQ(file, "in.txt");
  EXPECT_TRUE(f.IsSet("model"));
}

TEST(FlagSet, RejectsUnknownFlagsAndBadNumbers) {
  int n = 1;
  FlagSet f("rewind x", "test");
  f.Add("n", 'n', &n, "n");
  const char* a1[] = {"x", "--bogus"};
  EXPECT_FALSE(f.Parse(2, const_cast<char**>(a1)).ok());
  const char* a2[] = {"x", "-n", "abc"};
  EXPECT_FALSE(f.Parse(3, const_cast<char**>(a2)).ok());
  const char* a3[] = {"x", "-n"};
  EXPECT_FALSE(f.Parse(2, const_cast<char**>(a3)).ok());
}

TEST(FlagSet, AcceptsMultiLetterSingleDashAliasesLikeLlamaServer) {
  std::string k = "f16", v = "f16";
  FlagSet f("rewind x", "test");
  f.Add("cache-type-k", 0, &k, "K type");
  f.Add("cache-type-v", 0, &v, "V type");
  f.Alias("-ctk", "cache-type-k");
  f.Alias("-ctv", "cache-type-v");
  const char* argv[] = {"x", "-ctk", "q8_0", "-ctv", "q4_0"};
  ASSERT_TRUE(f.Parse(5, const_cast<char**>(argv)).ok());
  EXPECT_EQ(k, "q8_0");
  EXPECT_EQ(v, "q4_0");
  EXPECT_TRUE(f.IsSet("cache-type-k"));
  EXPECT_NE(f.Help().find("--cache-type-k, -ctk VALUE"), std::string::npos) << f.Help();
  const char* bad[] = {"x", "-ctx", "1"};
  EXPECT_FALSE(f.Parse(3, const_cast<char**>(bad)).ok());
}

TEST(FlagSet, HelpListsEveryFlagWithDefault) {
  int n = 42;
  bool b = true;
  FlagSet f("rewind x", "summary");
  f.Add("count", 'c', &n, "how many");
  f.Add("cache", 0, &b, "use the cache");
  std::string h = f.Help();
  EXPECT_NE(h.find("--count"), std::string::npos);
  EXPECT_NE(h.find("default: 42"), std::string::npos);
  EXPECT_NE(h.find("default: true"), std::string::npos);
}

TEST(FlagSet, NegatesBooleansWithNoPrefix) {
  bool cache = true;
  FlagSet f("rewind x", "s");
  f.Add("cache", 0, &cache, "c");
  const char* a[] = {"x", "--no-cache"};
  ASSERT_TRUE(f.Parse(2, const_cast<char**>(a)).ok());
  EXPECT_FALSE(cache);
}

TEST(FlagSet, AcceptsAliasesWithSeveralLettersAndOptionalValues) {
  int parallel = 1;
  bool batching = true;
  std::string fa, model;
  FlagSet f("t", "test");
  f.Add("parallel", 0, &parallel, "slots");
  f.Add("cont-batching", 0, &batching, "continuous batching");
  f.AddOptionalValue("flash-attn", 0, &fa, "on", "flash attention");
  f.Add("model", 'm', &model, "model");
  f.Alias("-np", "parallel");
  f.Alias("--n-parallel", "parallel");
  f.Alias("-nocb", "cont-batching", /*negate=*/true);
  f.Alias("-fa", "flash-attn");
  const char* argv[] = {"t", "-np", "3", "-nocb", "-fa", "-m", "x.gguf"};
  ASSERT_TRUE(f.Parse(7, const_cast<char**>(argv)).ok());
  EXPECT_EQ(parallel, 3);
  EXPECT_FALSE(batching);
  EXPECT_EQ(fa, "on");  // no value given: the next argument is a flag
  EXPECT_EQ(model, "x.gguf");
  const char* argv2[] = {"t", "--n-parallel=5", "-fa", "off"};
  ASSERT_TRUE(f.Parse(4, const_cast<char**>(argv2)).ok());
  EXPECT_EQ(parallel, 5);
  EXPECT_EQ(fa, "off");
  EXPECT_NE(f.Help().find("--parallel, -np, --n-parallel VALUE"), std::string::npos);
}

TEST(ParseIntList, AcceptsSpacesCommasAndBrackets) {
  auto v = ParseIntList("[1, 2 3,-4]");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int32_t>{1, 2, 3, -4}));
  EXPECT_FALSE(ParseIntList("1 x").ok());
}

}  // namespace
}  // namespace rw
