#include "fl/secagg/crypto.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include "glog/logging.h"

namespace fl::secagg {
namespace {

constexpr size_t kTagBytes = 16;

// OpenSSL objects freed on scope exit.
struct PkeyDeleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
struct PkeyCtxDeleter {
  void operator()(EVP_PKEY_CTX* p) const { EVP_PKEY_CTX_free(p); }
};
struct CipherCtxDeleter {
  void operator()(EVP_CIPHER_CTX* p) const { EVP_CIPHER_CTX_free(p); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyDeleter>;
using PkeyCtx = std::unique_ptr<EVP_PKEY_CTX, PkeyCtxDeleter>;
using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, CipherCtxDeleter>;

AeadNonce NonceFrom(uint64_t value) {
  AeadNonce nonce{};
  for (int i = 0; i < 8; ++i) nonce[i] = static_cast<uint8_t>(value >> (8 * i));
  return nonce;
}

}  // namespace

KeyPair X25519KeyPair(const Seed& private_key) {
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, private_key.data(),
                                        private_key.size()));
  CHECK(key != nullptr) << "EVP_PKEY_new_raw_private_key";
  KeyPair pair{private_key, {}};
  size_t size = pair.public_key.size();
  CHECK_EQ(EVP_PKEY_get_raw_public_key(key.get(), pair.public_key.data(), &size), 1);
  CHECK_EQ(size, pair.public_key.size());
  return pair;
}

absl::StatusOr<Seed> X25519(const Seed& own_private, const Seed& peer_public) {
  Pkey own(EVP_PKEY_new_raw_private_key(EVP_PKEY_X25519, nullptr, own_private.data(),
                                        own_private.size()));
  Pkey peer(EVP_PKEY_new_raw_public_key(EVP_PKEY_X25519, nullptr, peer_public.data(),
                                        peer_public.size()));
  if (own == nullptr || peer == nullptr) return absl::InvalidArgumentError("x25519: bad key");
  PkeyCtx derive(EVP_PKEY_CTX_new(own.get(), nullptr));
  Seed shared{};
  size_t shared_size = shared.size();
  if (derive == nullptr || EVP_PKEY_derive_init(derive.get()) != 1 ||
      EVP_PKEY_derive_set_peer(derive.get(), peer.get()) != 1 ||
      EVP_PKEY_derive(derive.get(), shared.data(), &shared_size) != 1 ||
      shared_size != shared.size()) {
    return absl::InvalidArgumentError("x25519: key agreement failed (a small-order peer key?)");
  }
  return shared;
}

Seed HkdfSha256(absl::Span<const uint8_t> key_material, absl::string_view info) {
  PkeyCtx hkdf(EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr));
  Seed key{};
  size_t key_size = key.size();
  CHECK(hkdf != nullptr);
  CHECK_EQ(EVP_PKEY_derive_init(hkdf.get()), 1);
  CHECK_EQ(EVP_PKEY_CTX_set_hkdf_md(hkdf.get(), EVP_sha256()), 1);
  CHECK_EQ(EVP_PKEY_CTX_set1_hkdf_key(hkdf.get(), key_material.data(),
                                      static_cast<int>(key_material.size())),
           1);
  CHECK_EQ(EVP_PKEY_CTX_add1_hkdf_info(hkdf.get(), reinterpret_cast<const uint8_t*>(info.data()),
                                       static_cast<int>(info.size())),
           1);
  CHECK_EQ(EVP_PKEY_derive(hkdf.get(), key.data(), &key_size), 1);
  CHECK_EQ(key_size, key.size());
  return key;
}

absl::StatusOr<Seed> AgreedKey(const Seed& own_private, const Seed& peer_public,
                               absl::string_view info) {
  absl::StatusOr<Seed> shared = X25519(own_private, peer_public);
  if (!shared.ok()) return shared.status();
  return HkdfSha256(*shared, info);
}

std::vector<uint8_t> AeadSeal(const Seed& key, const AeadNonce& nonce,
                              absl::Span<const uint8_t> associated_data,
                              absl::Span<const uint8_t> plaintext) {
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  CHECK_EQ(EVP_EncryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key.data(),
                              nonce.data()),
           1);
  int written = 0;
  if (!associated_data.empty()) {
    CHECK_EQ(EVP_EncryptUpdate(ctx.get(), nullptr, &written, associated_data.data(),
                               static_cast<int>(associated_data.size())),
             1);
  }
  std::vector<uint8_t> out(plaintext.size() + kTagBytes);
  CHECK_EQ(EVP_EncryptUpdate(ctx.get(), out.data(), &written, plaintext.data(),
                             static_cast<int>(plaintext.size())),
           1);
  int final_written = 0;
  CHECK_EQ(EVP_EncryptFinal_ex(ctx.get(), out.data() + written, &final_written), 1);
  CHECK_EQ(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_GET_TAG, kTagBytes,
                               out.data() + plaintext.size()),
           1);
  return out;
}

absl::StatusOr<std::vector<uint8_t>> AeadOpen(const Seed& key, const AeadNonce& nonce,
                                              absl::Span<const uint8_t> associated_data,
                                              absl::Span<const uint8_t> ciphertext) {
  if (ciphertext.size() < kTagBytes) return absl::InvalidArgumentError("open: too short");
  const size_t size = ciphertext.size() - kTagBytes;
  CipherCtx ctx(EVP_CIPHER_CTX_new());
  CHECK_EQ(EVP_DecryptInit_ex(ctx.get(), EVP_chacha20_poly1305(), nullptr, key.data(),
                              nonce.data()),
           1);
  int written = 0;
  if (!associated_data.empty()) {
    CHECK_EQ(EVP_DecryptUpdate(ctx.get(), nullptr, &written, associated_data.data(),
                               static_cast<int>(associated_data.size())),
             1);
  }
  std::vector<uint8_t> out(size);
  CHECK_EQ(EVP_DecryptUpdate(ctx.get(), out.data(), &written, ciphertext.data(),
                             static_cast<int>(size)),
           1);
  std::vector<uint8_t> tag(ciphertext.end() - kTagBytes, ciphertext.end());
  CHECK_EQ(EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_AEAD_SET_TAG, kTagBytes, tag.data()), 1);
  int final_written = 0;
  if (EVP_DecryptFinal_ex(ctx.get(), out.data() + written, &final_written) != 1) {
    return absl::InvalidArgumentError(
        "open: authentication failed (wrong key, nonce, associated data or a modified "
        "ciphertext)");
  }
  return out;
}

std::vector<uint8_t> Seal(const Seed& key, uint64_t nonce, absl::Span<const uint8_t> plaintext) {
  return AeadSeal(key, NonceFrom(nonce), {}, plaintext);
}

absl::StatusOr<std::vector<uint8_t>> Open(const Seed& key, uint64_t nonce,
                                          absl::Span<const uint8_t> ciphertext) {
  return AeadOpen(key, NonceFrom(nonce), {}, ciphertext);
}

}  // namespace fl::secagg
