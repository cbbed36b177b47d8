#include "base/sha256.h"

#include <gtest/gtest.h>

#include <string>

namespace rw {
namespace {

// FIPS 180-2 test vectors.
TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(DigestHex(Sha256(std::string_view(""))),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(DigestHex(Sha256(std::string_view("abc"))),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(DigestHex(Sha256(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"))),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256, IncrementalEqualsOneShot) {
  std::string s(1000, 'x');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 31 + 7);
  Sha256Hasher h;
  h.Update(s.substr(0, 1));
  h.Update(s.substr(1, 500));
  h.Update(s.substr(501));
  EXPECT_EQ(DigestHex(h.Final()), DigestHex(Sha256(std::string_view(s))));
}

// RFC 4231 test cases 1, 2 and 6 (a key longer than the block).
TEST(HmacSha256, MatchesRfc4231) {
  EXPECT_EQ(DigestHex(HmacSha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(DigestHex(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(DigestHex(HmacSha256(std::string(131, '\xaa'),
                                 "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(DigestEqual, TellsOneFlippedBit) {
  Digest256 a = Sha256(std::string_view("a"));
  Digest256 b = a;
  EXPECT_TRUE(DigestEqual(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(DigestEqual(a, b));
}

TEST(SecureRandomBytes, FillsAndDiffers) {
  uint8_t a[32] = {}, b[32] = {};
  ASSERT_TRUE(SecureRandomBytes(a, sizeof a).ok());
  ASSERT_TRUE(SecureRandomBytes(b, sizeof b).ok());
  EXPECT_NE(std::string(reinterpret_cast<char*>(a), 32), std::string(reinterpret_cast<char*>(b), 32));
}

}  // namespace
}  // namespace rw
