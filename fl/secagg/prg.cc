#include "fl/secagg/prg.h"

#include <cstring>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "glog/logging.h"

namespace fl::secagg {

struct Prg::Cipher {
  EVP_CIPHER_CTX* ctx = nullptr;
};

Prg::Prg(const Seed& seed) : cipher_(std::make_unique<Cipher>()) {
  cipher_->ctx = EVP_CIPHER_CTX_new();
  CHECK(cipher_->ctx != nullptr) << "EVP_CIPHER_CTX_new";
  // ChaCha20's 16-byte IV: a 4-byte block counter and a 12-byte nonce, all zero.
  const uint8_t iv[16] = {0};
  CHECK_EQ(EVP_EncryptInit_ex(cipher_->ctx, EVP_chacha20(), nullptr, seed.data(), iv), 1);
}

Prg::~Prg() { EVP_CIPHER_CTX_free(cipher_->ctx); }

void Prg::Fill(uint8_t* out, size_t size) {
  // The keystream is the encryption of zeros.
  std::memset(out, 0, size);
  size_t done = 0;
  while (done < size) {
    const int chunk = static_cast<int>(std::min<size_t>(size - done, 1 << 20));
    int written = 0;
    CHECK_EQ(EVP_EncryptUpdate(cipher_->ctx, out + done, &written, out + done, chunk), 1);
    CHECK_EQ(written, chunk);
    done += chunk;
  }
}

uint64_t Prg::NextUint64() {
  uint8_t bytes[8];
  Fill(bytes, sizeof(bytes));
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

Seed Prg::NextSeed() {
  Seed seed;
  Fill(seed.data(), seed.size());
  return seed;
}

std::vector<uint32_t> Prg::Words(size_t count) {
  std::vector<uint32_t> words(count);
  Words(words.data(), count);
  return words;
}

void Prg::Words(uint32_t* out, size_t count) {
  Fill(reinterpret_cast<uint8_t*>(out), 4 * count);
  // The bytes are little-endian words as they stand on such a host; elsewhere swap.
  if constexpr (__BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__) {
    for (size_t i = 0; i < count; ++i) out[i] = __builtin_bswap32(out[i]);
  }
}

Seed SeedFrom(uint64_t value, uint64_t label) {
  Seed seed{};
  for (int i = 0; i < 8; ++i) {
    seed[i] = static_cast<uint8_t>(value >> (8 * i));
    seed[8 + i] = static_cast<uint8_t>(label >> (8 * i));
  }
  // Whitened through the PRG itself, so nearby values give unrelated seeds.
  Prg prg(seed);
  return prg.NextSeed();
}

absl::StatusOr<Seed> OsSeed() {
  Seed seed;
  if (RAND_bytes(seed.data(), static_cast<int>(seed.size())) != 1) {
    return absl::UnavailableError(
        "the operating system gave no randomness (OpenSSL RAND_bytes failed)");
  }
  return seed;
}

}  // namespace fl::secagg
