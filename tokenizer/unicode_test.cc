#include "tokenizer/unicode.h"

#include <gtest/gtest.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace rw::tokenizer {
namespace {

std::vector<uint32_t> Cpts(std::string_view s) {
  std::vector<uint32_t> out;
  DecodeUtf8Lenient(s, &out);
  return out;
}

TEST(Unicode, MapsBytesToTheGpt2Alphabet) {
  EXPECT_EQ(ByteToUnicodeUtf8(0x20), "\xC4\xA0");  // U+0120 Ġ
  EXPECT_EQ(ByteToUnicodeUtf8(0x0A), "\xC4\x8A");  // U+010A Ċ
  EXPECT_EQ(ByteToUnicodeUtf8(0x09), "\xC4\x89");  // U+0109 ĉ
  EXPECT_EQ(ByteToUnicodeUtf8(0x7F), "\xC4\xA1");  // U+0121
  EXPECT_EQ(ByteToUnicodeUtf8(0xAD), "\xC5\x83");  // U+0143
  EXPECT_EQ(ByteToUnicodeUtf8('A'), "A");
  EXPECT_EQ(ByteToUnicodeUtf8(0xE9), "\xC3\xA9");  // U+00E9 stands for itself
  for (int b = 0; b < 256; ++b) {
    const auto cpts = Cpts(ByteToUnicodeUtf8(static_cast<uint8_t>(b)));
    ASSERT_EQ(cpts.size(), 1u);
    EXPECT_EQ(UnicodeToByte(cpts[0]), b);
  }
  EXPECT_EQ(UnicodeToByte(0x0144), -1);
  EXPECT_EQ(UnicodeToByte(0x4E00), -1);
}

TEST(Unicode, DecodesLikeLlamaCppIncludingInvalidBytes) {
  EXPECT_EQ(Cpts("a\xC3\xA9\xE4\xBD\xA0\xF0\x9F\xA6\x99"), (std::vector<uint32_t>{'a', 0xE9, 0x4F60, 0x1F999}));
  EXPECT_EQ(Cpts("\xFF"), (std::vector<uint32_t>{0xFFFD}));
  EXPECT_EQ(Cpts("\xE4\xBD"), (std::vector<uint32_t>{0xFFFD, 0xFFFD}));
  EXPECT_EQ(Cpts("\xE4\xBDx"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 'x'}));
  EXPECT_EQ(Cpts("\xC0\x80"), (std::vector<uint32_t>{0}));           // over-long accepted
  EXPECT_EQ(Cpts("\xED\xA0\x80"), (std::vector<uint32_t>{0xD800}));  // surrogate accepted
  EXPECT_EQ(Cpts("\xF7\xBF\xBF\xBF"), (std::vector<uint32_t>{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD}));
}

TEST(Unicode, ReportsWhetherTheInputWasCanonical) {
  std::vector<uint32_t> cpts;
  EXPECT_TRUE(DecodeUtf8Lenient("a\xC3\xA9\xF0\x9F\xA6\x99\xED\xA0\x80", &cpts));
  EXPECT_FALSE(DecodeUtf8Lenient("\xC1\x81", &cpts));
  EXPECT_FALSE(DecodeUtf8Lenient("\xE0\x81\x81", &cpts));
  EXPECT_FALSE(DecodeUtf8Lenient("\xF0\x80\x81\x81", &cpts));
  EXPECT_FALSE(DecodeUtf8Lenient("x\xFF", &cpts));
  EXPECT_TRUE(DecodeUtf8Lenient("", &cpts));
}

TEST(Unicode, FindsIncompleteTails) {
  EXPECT_EQ(IncompleteUtf8Tail(""), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xF0"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xF0\x9F"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xF0\x9F\xA6"), 3u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xF0\x9F\xA6\x99"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("\xE4\xBD"), 2u);
  EXPECT_EQ(IncompleteUtf8Tail("\xC3"), 1u);
  EXPECT_EQ(IncompleteUtf8Tail("\x80"), 0u);      // stray continuation: invalid, not incomplete
  EXPECT_EQ(IncompleteUtf8Tail("\xE0\x80"), 0u);  // can never become valid (over-long)
  EXPECT_EQ(IncompleteUtf8Tail("\xFF"), 0u);
}

TEST(Unicode, SanitizesInvalidSequences) {
  EXPECT_EQ(SanitizeUtf8("ok \xE4\xBD\xA0"), "ok \xE4\xBD\xA0");
  EXPECT_EQ(SanitizeUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(SanitizeUtf8("\xE4\xBD"), "\xEF\xBF\xBD");  // one maximal subpart
  EXPECT_EQ(SanitizeUtf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

// The generated table against PCRE2's own Unicode data, for every code point PCRE2 knows (it may be an older
// Unicode version: code points it calls unassigned are skipped).
TEST(Unicode, FlagTableAgreesWithPcre2OnAssignedCodePoints) {
  auto compile = [](const char* re) {
    int err;
    PCRE2_SIZE off;
    pcre2_code* c = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(re), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                  &err, &off, nullptr);
    pcre2_jit_compile(c, PCRE2_JIT_COMPLETE);
    return c;
  };
  pcre2_code* unassigned = compile("^\\p{Cn}$");
  pcre2_code* re[3] = {compile("^\\p{L}$"), compile("^\\p{N}$"), compile("^\\p{M}$")};
  const uint8_t bits[3] = {kFlagLetter, kFlagNumber, kFlagMark};
  pcre2_match_data* md = pcre2_match_data_create(4, nullptr);
  int n_checked = 0, n_mismatch = 0;
  for (uint32_t cpt = 0; cpt < 0x110000; ++cpt) {
    if (cpt >= 0xD800 && cpt <= 0xDFFF) continue;
    if (cpt >= 0x40000 && cpt < 0xE0000) continue;  // unassigned planes
    std::string s;
    AppendUtf8(cpt, &s);
    auto match = [&](pcre2_code* c) {
      return pcre2_match(c, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md, nullptr) >= 0;
    };
    if (match(unassigned)) continue;
    ++n_checked;
    for (int k = 0; k < 3; ++k) {
      const bool want = match(re[k]);
      const bool got = (CptFlags(cpt) & bits[k]) != 0;
      if (want != got && ++n_mismatch < 10) ADD_FAILURE() << "U+" << std::hex << cpt << " property " << k;
    }
  }
  EXPECT_GT(n_checked, 250000);
  EXPECT_EQ(n_mismatch, 0);
  pcre2_match_data_free(md);
  for (auto* c : re) pcre2_code_free(c);
  pcre2_code_free(unassigned);
}

TEST(Unicode, WhitespaceIsExactlyTheSpecList) {
  const uint32_t ws[] = {0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003,
                         0x2004, 0x2005, 0x2006, 0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  std::vector<uint32_t> got;
  for (uint32_t c = 0; c < 0x110000; ++c) {
    if (CptFlags(c) & kFlagSpace) got.push_back(c);
  }
  EXPECT_EQ(got, std::vector<uint32_t>(std::begin(ws), std::end(ws)));
}

}  // namespace
}  // namespace rw::tokenizer
