#ifndef FL_CODEC_H_
#define FL_CODEC_H_

// Compression codecs for what clients and the server send each other, applied per
// tensor: what the receiver reconstructs, and the exact size of the encoding.
//
//   IDENTITY        every element, at its own width
//   TOP_K           the k = ceil(q n) elements of largest magnitude, exactly
//   SPARSE_TERNARY  Sattler et al.'s ST_q: the nonzero elements with |T| >= the k-th
//                   largest magnitude (ties may add more), sent as their sign and one
//                   shared magnitude, the mean of the k largest |T|
//   UNIFORM_8BIT    every element rounded to the nearest of 256 levels spanning
//                   [min T, max T]
//
// Sizes: a sparse encoding sends its positions as whichever is smaller, 4-byte
// indices or an n-bit mask; values as 4 bytes each (TOP_K); signs as 1 bit each and
// the magnitude as 4 bytes (SPARSE_TERNARY); UNIFORM_8BIT sends 1 byte per element
// and its two 4-byte bounds. Integer tensors (buffers such as a batch counter) are
// always sent as they are.
//
// Error feedback (Seide et al.; Sattler et al.): the sender keeps what encoding lost
// and adds it to its next message, so nothing is lost over rounds.

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/model_state.h"
#include "fl/spec.pb.h"

namespace fl {

struct CodecConfig {
  enum class Kind { kIdentity, kTopK, kSparseTernary, kUniform8Bit };
  Kind kind = Kind::kIdentity;
  // q, the share of elements kept by TOP_K and SPARSE_TERNARY, in (0, 1].
  double fraction = 1.0;
};

// Fails naming the field when `config` is out of range.
absl::Status CheckCodec(const CodecConfig& config);

// The spec's codec (CodecSpec) as a CodecConfig.
CodecConfig CodecFromSpec(const fedkit::CodecSpec& spec);

struct EncodedTensor {
  at::Tensor decoded;  // what the receiver reconstructs, shape and dtype of the input
  int64_t bytes = 0;   // the size of the encoding
};

// REQUIRES: CheckCodec(config) is OK.
EncodedTensor EncodeTensor(const at::Tensor& tensor, const CodecConfig& config);

struct EncodedState {
  ModelState decoded;
  int64_t bytes = 0;
};

// Every tensor of `state` encoded alone.
EncodedState Encode(const ModelState& state, const CodecConfig& config);

// Encodes `message` plus the sender's `residual` (same layout; empty: none yet)
// and leaves in `residual` what the encoding lost: afterwards
//   decoded + residual == message + residual before.
EncodedState EncodeWithErrorFeedback(const ModelState& message, const CodecConfig& config,
                                     ModelState& residual);

}  // namespace fl

#endif  // FL_CODEC_H_
