#include "fl/secagg/crypto.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace fl::secagg {
namespace {

TEST(CryptoTest, BothEndsOfAPairAgreeAndOthersDoNot) {
  const KeyPair a = X25519KeyPair(SeedFrom(1, 1));
  const KeyPair b = X25519KeyPair(SeedFrom(2, 1));
  const KeyPair c = X25519KeyPair(SeedFrom(3, 1));
  auto ab = AgreedKey(a.private_key, b.public_key, "mask");
  auto ba = AgreedKey(b.private_key, a.public_key, "mask");
  auto ac = AgreedKey(a.private_key, c.public_key, "mask");
  auto ab_other_info = AgreedKey(a.private_key, b.public_key, "share");
  ASSERT_TRUE(ab.ok() && ba.ok() && ac.ok() && ab_other_info.ok());
  EXPECT_EQ(*ab, *ba);
  EXPECT_NE(*ab, *ac);
  EXPECT_NE(*ab, *ab_other_info);
}

TEST(CryptoTest, RfcSevenSevenFourEightVector) {
  // RFC 7748, section 6.1: Alice's private key gives her public key.
  const Seed alice_private = {0x77, 0x07, 0x6d, 0x0a, 0x73, 0x18, 0xa5, 0x7d, 0x3c, 0x16, 0xc1,
                              0x72, 0x51, 0xb2, 0x66, 0x45, 0xdf, 0x4c, 0x2f, 0x87, 0xeb, 0xc0,
                              0x99, 0x2a, 0xb1, 0x77, 0xfb, 0xa5, 0x1d, 0xb9, 0x2c, 0x2a};
  const Seed alice_public = {0x85, 0x20, 0xf0, 0x09, 0x89, 0x30, 0xa7, 0x54, 0x74, 0x8b, 0x7d,
                             0xdc, 0xb4, 0x3e, 0xf7, 0x5a, 0x0d, 0xbf, 0x3a, 0x0d, 0x26, 0x38,
                             0x1a, 0xf4, 0xeb, 0xa4, 0xa9, 0x8e, 0xaa, 0x9b, 0x4e, 0x6a};
  EXPECT_EQ(X25519KeyPair(alice_private).public_key, alice_public);
}

TEST(CryptoTest, SealedSharesOpenOnlyWithTheirKeyAndNonce) {
  const Seed key = SeedFrom(9, 9);
  const std::vector<uint8_t> plain = {1, 2, 3, 4, 5};
  const std::vector<uint8_t> sealed = Seal(key, 17, plain);
  EXPECT_EQ(sealed.size(), plain.size() + 16);
  auto opened = Open(key, 17, sealed);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, plain);
  EXPECT_FALSE(Open(key, 18, sealed).ok());
  EXPECT_FALSE(Open(SeedFrom(9, 10), 17, sealed).ok());
  std::vector<uint8_t> tampered = sealed;
  tampered[0] ^= 1;
  EXPECT_FALSE(Open(key, 17, tampered).ok());
}

TEST(PrgTest, SameSeedSameStreamAndWordsLookUniform) {
  Prg a(SeedFrom(4, 2)), b(SeedFrom(4, 2)), c(SeedFrom(4, 3));
  const std::vector<uint32_t> wa = a.Words(100000), wb = b.Words(100000), wc = c.Words(100000);
  EXPECT_EQ(wa, wb);
  EXPECT_NE(wa, wc);
  // The top bit is set in half the words: 50000 +- 4 sd (sd 158).
  int64_t top = 0;
  for (uint32_t w : wa) top += w >> 31;
  EXPECT_NEAR(top, 50000, 632);
}

TEST(PrgTest, WordsAreTheStreamsLittleEndianWordsAndChunksContinueIt) {
  Prg bytes_prg(SeedFrom(5, 1)), words_prg(SeedFrom(5, 1)), chunked_prg(SeedFrom(5, 1));
  uint8_t bytes[32];
  bytes_prg.Fill(bytes, sizeof(bytes));
  const std::vector<uint32_t> words = words_prg.Words(8);
  for (int i = 0; i < 8; ++i) {
    const uint32_t expected = uint32_t{bytes[4 * i]} | uint32_t{bytes[4 * i + 1]} << 8 |
                              uint32_t{bytes[4 * i + 2]} << 16 | uint32_t{bytes[4 * i + 3]} << 24;
    EXPECT_EQ(words[i], expected) << "word " << i;
  }
  uint32_t chunked[8];
  chunked_prg.Words(chunked, 3);
  chunked_prg.Words(chunked + 3, 5);
  EXPECT_EQ(std::vector<uint32_t>(chunked, chunked + 8), words);
}

}  // namespace
}  // namespace fl::secagg
