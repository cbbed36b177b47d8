#include "server/text_stream.h"

#include <gtest/gtest.h>

#include <random>

namespace rw::server {
namespace {

// Feeds `text` split at the given cut points and returns everything released.
std::string FeedSplit(TextStream& s, const std::string& text, const std::vector<size_t>& cuts) {
  std::string out;
  size_t prev = 0;
  for (size_t c : cuts) {
    out += s.Push(text.substr(prev, c - prev));
    prev = c;
  }
  out += s.Push(text.substr(prev));
  out += s.Finish();
  return out;
}

TEST(StopMatcher, ReleasesTextBeforeAStopStringSplitOverPieces) {
  StopMatcher m({"</answer>"});
  std::string out;
  out += m.Push("The result is 4</an");
  EXPECT_EQ(out, "The result is 4");  // "</an" is held back
  out += m.Push("swer> and more");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(out, "The result is 4");
  EXPECT_EQ(m.matched(), "</answer>");
  EXPECT_EQ(m.Push("ignored"), "");
}

TEST(StopMatcher, ReleasesAHeldBackTailThatTurnsOutNotToMatch) {
  StopMatcher m({"STOP"});
  EXPECT_EQ(m.Push("ab ST"), "ab ");
  EXPECT_EQ(m.Push("ART"), "START");
  EXPECT_FALSE(m.stopped());
  EXPECT_EQ(m.Push("x S"), "x ");
  EXPECT_EQ(m.Finish(), "S");
}

TEST(StopMatcher, PicksTheEarliestOfSeveralStopStrings) {
  StopMatcher m({"world", "lo w"});
  EXPECT_EQ(m.Push("hello world"), "hel");
  EXPECT_EQ(m.matched(), "lo w");
}

TEST(StopMatcher, WithoutStopStringsReleasesEverythingAtOnce) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("abc"), "abc");
  EXPECT_EQ(m.Finish(), "");
}

TEST(Utf8CompletePrefix, HoldsBackAnIncompleteTrailingCharacter) {
  EXPECT_EQ(Utf8CompletePrefix("abc"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("h\xC3"), 1u);
  EXPECT_EQ(Utf8CompletePrefix("h\xC3\xA9"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("\xE6\x97"), 0u);
  EXPECT_EQ(Utf8CompletePrefix("x\xF0\x9F\x98"), 1u);
  EXPECT_EQ(Utf8CompletePrefix("x\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(Utf8CompletePrefix("\x80\x80"), 2u);  // stray continuation bytes go through
}

TEST(TextStream, AnySplitOfTheTextReleasesTheSameTextAsOnePiece) {
  const std::string text = "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC END-MARK tail";
  TextStream whole({"END-MARK"});
  std::string expected = FeedSplit(whole, text, {});
  EXPECT_EQ(expected, "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC ");
  std::mt19937 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < text.size(); ++i) {
      if (rng() % 3 == 0) cuts.push_back(i);
    }
    TextStream s({"END-MARK"});
    std::string out;
    size_t prev = 0;
    for (size_t c : cuts) {
      std::string piece = s.Push(text.substr(prev, c - prev));
      // Every released piece ends on a character boundary.
      EXPECT_EQ(Utf8CompletePrefix(piece), piece.size());
      out += piece;
      prev = c;
    }
    out += s.Push(text.substr(prev));
    out += s.Finish();
    ASSERT_EQ(out, expected) << "trial " << trial;
  }
}

}  // namespace
}  // namespace rw::server
