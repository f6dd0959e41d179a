#include "fl/secagg/crypto.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace fl::secagg {
namespace {

// Known-answer vectors are written as in their RFCs, in hex.
std::vector<uint8_t> Hex(const std::string& hex) {
  const std::string bytes = absl::HexStringToBytes(hex);
  return {bytes.begin(), bytes.end()};
}

Seed HexSeed(const std::string& hex) {
  const std::vector<uint8_t> bytes = Hex(hex);
  Seed seed{};
  EXPECT_EQ(bytes.size(), seed.size()) << hex;
  std::copy(bytes.begin(), bytes.begin() + std::min(bytes.size(), seed.size()), seed.begin());
  return seed;
}

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

TEST(CryptoTest, RfcSevenSevenFourEightSharedSecret) {
  // RFC 7748, section 6.1: both ends of Alice and Bob's exchange reach K.
  const Seed alice_private =
      HexSeed("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a");
  const Seed alice_public =
      HexSeed("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a");
  const Seed bob_private =
      HexSeed("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb");
  const Seed bob_public =
      HexSeed("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f");
  const Seed shared = HexSeed("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742");
  EXPECT_EQ(X25519KeyPair(bob_private).public_key, bob_public);
  auto alice = X25519(alice_private, bob_public);
  auto bob = X25519(bob_private, alice_public);
  ASSERT_TRUE(alice.ok() && bob.ok());
  EXPECT_EQ(*alice, shared);
  EXPECT_EQ(*bob, shared);
  // A pair's key is HKDF over exactly that secret.
  auto agreed = AgreedKey(alice_private, bob_public, "mask");
  ASSERT_TRUE(agreed.ok());
  EXPECT_EQ(*agreed, HkdfSha256(shared, "mask"));
}

TEST(CryptoTest, AllZeroSharedSecretIsRefused) {
  // The point of order 1 (u = 0) gives the all-zero secret: RFC 7748, section 6.1's check.
  EXPECT_FALSE(X25519(SeedFrom(1, 1), Seed{}).ok());
  EXPECT_FALSE(AgreedKey(SeedFrom(1, 1), Seed{}, "mask").ok());
}

TEST(CryptoTest, RfcFiveEightSixNineHkdfVector) {
  // RFC 5869, test case 3 (SHA-256, no salt, no info): the first 32 of its 42 bytes.
  EXPECT_EQ(HkdfSha256(std::vector<uint8_t>(22, 0x0b), ""),
            HexSeed("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d"));
}

TEST(CryptoTest, RfcEightFourThreeNineAeadVector) {
  // RFC 8439, section 2.8.2.
  const Seed key = HexSeed("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
  const std::vector<uint8_t> nonce_bytes = Hex("070000004041424344454647");
  AeadNonce nonce;
  std::copy(nonce_bytes.begin(), nonce_bytes.end(), nonce.begin());
  const std::vector<uint8_t> aad = Hex("50515253c0c1c2c3c4c5c6c7");
  const std::string text =
      "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the "
      "future, sunscreen would be it.";
  const std::vector<uint8_t> plaintext(text.begin(), text.end());
  const std::vector<uint8_t> expected = Hex(
      "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69"
      "da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad67594"
      "5585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"
      "1ae10b594f09e26a7e902ecbd0600691");  // the tag
  const std::vector<uint8_t> sealed = AeadSeal(key, nonce, aad, plaintext);
  EXPECT_EQ(absl::BytesToHexString(std::string(sealed.begin(), sealed.end())),
            absl::BytesToHexString(std::string(expected.begin(), expected.end())));
  auto opened = AeadOpen(key, nonce, aad, expected);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, plaintext);
  std::vector<uint8_t> other_aad = aad;
  other_aad[0] ^= 1;
  EXPECT_FALSE(AeadOpen(key, nonce, other_aad, expected).ok());
}

TEST(CryptoTest, SealIsTheAeadWithTheCounterAsLittleEndianNonce) {
  const Seed key = SeedFrom(9, 9);
  const std::vector<uint8_t> plain = {1, 2, 3, 4, 5};
  const AeadNonce nonce = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0, 0, 0, 0};
  EXPECT_EQ(Seal(key, 0x0706050403020100, plain), AeadSeal(key, nonce, {}, plain));
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

TEST(PrgTest, RfcEightFourThreeNineKeystreamVectors) {
  // RFC 8439, appendix A.1, test vectors 1 and 2: the all-zero key and nonce,
  // blocks 0 and 1 (the PRG starts at block 0 and runs on).
  Prg prg(Seed{});
  std::vector<uint8_t> stream(128);
  prg.Fill(stream.data(), stream.size());
  EXPECT_EQ(absl::BytesToHexString(std::string(stream.begin(), stream.end())),
            "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
            "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586"
            "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed"
            "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f");
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
