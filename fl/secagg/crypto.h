#ifndef FL_SECAGG_CRYPTO_H_
#define FL_SECAGG_CRYPTO_H_

// The public-key and symmetric primitives of secure aggregation, from OpenSSL:
// X25519 key agreement with HKDF-SHA256 on the shared secret (the pairwise mask
// seeds and the keys that encrypt Shamir shares between two clients), and
// ChaCha20-Poly1305 to encrypt those shares so that the server, which routes them,
// cannot read them.

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "fl/secagg/prg.h"

namespace fl::secagg {

struct KeyPair {
  Seed private_key;
  Seed public_key;
};

// The X25519 key pair whose private key is `private_key`.
KeyPair X25519KeyPair(const Seed& private_key);

// RFC 7748's X25519 function: the shared secret of a private and a peer's public
// key. Errors: a peer key that gives the all-zero secret (a small-order point).
absl::StatusOr<Seed> X25519(const Seed& own_private, const Seed& peer_public);

// RFC 5869's HKDF with SHA-256 and no salt: 32 bytes of output keying material.
Seed HkdfSha256(absl::Span<const uint8_t> key_material, absl::string_view info);

// HKDF-SHA256(X25519(own_private, peer_public), info): the same for both ends of a
// pair. Errors as X25519's.
absl::StatusOr<Seed> AgreedKey(const Seed& own_private, const Seed& peer_public,
                               absl::string_view info);

// RFC 8439's AEAD_CHACHA20_POLY1305: the ciphertext followed by its 16-byte tag.
// AeadOpen fails (InvalidArgument) on a wrong key, nonce, associated data or a
// modified ciphertext.
using AeadNonce = std::array<uint8_t, 12>;
std::vector<uint8_t> AeadSeal(const Seed& key, const AeadNonce& nonce,
                              absl::Span<const uint8_t> associated_data,
                              absl::Span<const uint8_t> plaintext);
absl::StatusOr<std::vector<uint8_t>> AeadOpen(const Seed& key, const AeadNonce& nonce,
                                              absl::Span<const uint8_t> associated_data,
                                              absl::Span<const uint8_t> ciphertext);

// AeadSeal / AeadOpen with no associated data and the 96-bit nonce `nonce`
// little-endian, then four zero bytes.
std::vector<uint8_t> Seal(const Seed& key, uint64_t nonce, absl::Span<const uint8_t> plaintext);
absl::StatusOr<std::vector<uint8_t>> Open(const Seed& key, uint64_t nonce,
                                          absl::Span<const uint8_t> ciphertext);

}  // namespace fl::secagg

#endif  // FL_SECAGG_CRYPTO_H_
