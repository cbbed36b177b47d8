// String helpers with Python semantics over UTF-8 text (whitespace sets, split, title case, code-point
// indexing), shared by the Jinja filters and string methods.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rw::chat::jinja {

// Python str.strip()/lstrip()/rstrip(); `chars` null means whitespace.
std::string Strip(std::string_view s, const std::string* chars, bool left, bool right);
// Python str.split(sep=None, maxsplit=-1) / rsplit.
std::vector<std::string> Split(std::string_view s, const std::string* sep, int64_t maxsplit);
std::vector<std::string> RSplit(std::string_view s, const std::string* sep, int64_t maxsplit);
std::string Replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
std::string Lower(std::string_view s);
std::string Upper(std::string_view s);
std::string Title(std::string_view s);
std::string Capitalize(std::string_view s);
int64_t CountOf(std::string_view s, std::string_view sub);

// UTF-8 code points of s (each as its byte string).
std::vector<std::string> CodePoints(std::string_view s);
bool IsAscii(std::string_view s);
// Number of code points.
size_t CodePointLength(std::string_view s);

}  // namespace rw::chat::jinja
