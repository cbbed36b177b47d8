// Test helpers shared by the output-parser tests (output_parser_test.cc, tool_call_kimi_test.cc): a text fed in
// pieces against ParseOutput, and the two-city parallel-call sample every tool-call format parses.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.h"

namespace rw::chat {

// Concatenation of every delta of `text` fed in pieces cut at `cuts`, as a streaming client would see it
// (checked against the parser's own message).
inline ParsedMessage Stream(const std::string& text, const ParserOptions& o, const std::vector<size_t>& cuts) {
  OutputParser p(o);
  ParsedMessage acc;
  auto take = [&](const ParserDelta& d) {
    acc.content += d.content;
    acc.reasoning_content += d.reasoning;
    for (const auto& tc : d.tool_calls) {
      if (!tc.name.empty()) {  // a call's first fragment
        EXPECT_EQ(tc.index, acc.tool_calls.size());
        acc.tool_calls.push_back({tc.name, tc.arguments});
      } else {
        ASSERT_LT(tc.index, acc.tool_calls.size());
        acc.tool_calls[tc.index].arguments += tc.arguments;
      }
    }
  };
  size_t prev = 0;
  for (size_t c : cuts) {
    take(p.Feed(std::string_view(text).substr(prev, c - prev)));
    prev = c;
  }
  take(p.Feed(std::string_view(text).substr(prev)));
  take(p.Finish());
  const ParsedMessage& m = p.message();
  EXPECT_EQ(m.content, acc.content);
  EXPECT_EQ(m.reasoning_content, acc.reasoning_content);
  EXPECT_EQ(m.tool_calls.size(), acc.tool_calls.size());
  return acc;
}

inline void ExpectSame(const ParsedMessage& a, const ParsedMessage& b, const std::string& where) {
  EXPECT_EQ(a.content, b.content) << where;
  EXPECT_EQ(a.reasoning_content, b.reasoning_content) << where;
  ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size()) << where;
  for (size_t i = 0; i < a.tool_calls.size(); ++i) {
    EXPECT_EQ(a.tool_calls[i].name, b.tool_calls[i].name) << where;
    EXPECT_EQ(a.tool_calls[i].arguments, b.tool_calls[i].arguments) << where;
  }
}

// Streaming `text` whole, cut once at every offset, and byte by byte gives ParseOutput's message.
inline void ExpectStreamingMatchesOneShot(const std::string& text, const ParserOptions& o) {
  const ParsedMessage one = ParseOutput(text, o);
  ExpectSame(Stream(text, o, {}), one, "whole: " + text);
  for (size_t cut = 0; cut <= text.size(); ++cut)
    ExpectSame(Stream(text, o, {cut}), one, "cut " + std::to_string(cut) + ": " + text);
  std::vector<size_t> every;
  for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
  ExpectSame(Stream(text, o, every), one, "byte by byte: " + text);
}

// Malformed blocks: no call, and the block (opening tag `open`) stays in the content.
inline void ExpectMalformedStaysContent(const std::vector<std::string>& texts, const ParserOptions& o,
                                        const std::string& open) {
  for (const std::string& text : texts) {
    const ParsedMessage m = ParseOutput(text, o);
    EXPECT_TRUE(m.tool_calls.empty()) << text;
    EXPECT_NE(m.content.find(open), std::string::npos) << text;
  }
}

// The parallel-call sample: content "Checking both." and two get_weather calls with these arguments.
inline void ExpectTwoWeatherCalls(const ParsedMessage& m, std::string_view args0, std::string_view args1) {
  EXPECT_EQ(m.content, "Checking both.");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  for (const auto& call : m.tool_calls) EXPECT_EQ(call.name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments, args0);
  EXPECT_EQ(m.tool_calls[1].arguments, args1);
}

}  // namespace rw::chat
