#include "fl/codec.h"

#include <algorithm>
#include <cmath>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"

namespace fl {
namespace {

// Positions of `count` of `numel` elements: 4-byte indices or an n-bit mask.
int64_t PositionBytes(int64_t count, int64_t numel) {
  return std::min<int64_t>(4 * count, (numel + 7) / 8);
}

int64_t KeptCount(int64_t numel, double fraction) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(fraction * numel)));
}

}  // namespace

absl::Status CheckCodec(const CodecConfig& config) {
  if ((config.kind == CodecConfig::Kind::kTopK ||
       config.kind == CodecConfig::Kind::kSparseTernary) &&
      !(config.fraction > 0 && config.fraction <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("fraction: must be in (0, 1], got ", config.fraction));
  }
  return absl::OkStatus();
}

CodecConfig CodecFromSpec(const fedkit::CodecSpec& spec) {
  CodecConfig config;
  switch (spec.kind()) {
    case fedkit::CodecSpec::TOP_K:
      config.kind = CodecConfig::Kind::kTopK;
      break;
    case fedkit::CodecSpec::SPARSE_TERNARY:
      config.kind = CodecConfig::Kind::kSparseTernary;
      break;
    case fedkit::CodecSpec::UNIFORM_8BIT:
      config.kind = CodecConfig::Kind::kUniform8Bit;
      break;
    default:
      config.kind = CodecConfig::Kind::kIdentity;
  }
  config.fraction = spec.fraction();
  return config;
}

EncodedTensor EncodeTensor(const at::Tensor& tensor, const CodecConfig& config) {
  const int64_t n = tensor.numel();
  if (n == 0 || !at::isFloatingType(tensor.scalar_type()) ||
      config.kind == CodecConfig::Kind::kIdentity) {
    return {tensor.clone(), n * static_cast<int64_t>(tensor.element_size())};
  }
  const at::Tensor flat = tensor.flatten().to(at::kFloat);
  at::Tensor out;
  int64_t bytes = 0;
  switch (config.kind) {
    case CodecConfig::Kind::kTopK: {
      const int64_t k = KeptCount(n, config.fraction);
      const at::Tensor index = std::get<1>(flat.abs().topk(k));
      out = at::zeros_like(flat).index_copy_(0, index, flat.index_select(0, index));
      bytes = PositionBytes(k, n) + 4 * k;
      break;
    }
    case CodecConfig::Kind::kSparseTernary: {
      const int64_t k = KeptCount(n, config.fraction);
      const at::Tensor largest = std::get<0>(flat.abs().topk(k));
      const at::Tensor threshold = largest[k - 1];
      const at::Tensor magnitude = largest.mean();
      // Zeros carry nothing even where the threshold is 0.
      const at::Tensor kept = flat.abs().ge(threshold).logical_and(flat.ne(0));
      out = at::where(kept, flat.sign() * magnitude, at::zeros_like(flat));
      const int64_t count = kept.sum().item<int64_t>();
      bytes = PositionBytes(count, n) + (count + 7) / 8 + 4;
      break;
    }
    case CodecConfig::Kind::kUniform8Bit: {
      const at::Tensor lo = flat.min();
      const at::Tensor span = (flat.max() - lo).clamp_min(1e-30);
      const at::Tensor levels = ((flat - lo) / span * 255.0).round();
      out = lo + levels * (span / 255.0);
      bytes = n + 8;
      break;
    }
    case CodecConfig::Kind::kIdentity:
      break;  // handled above
  }
  return {out.view(tensor.sizes()).to(tensor.scalar_type()), bytes};
}

EncodedState Encode(const ModelState& state, const CodecConfig& config) {
  EncodedState encoded;
  encoded.decoded = state;  // entries replaced below
  for (size_t i = 0; i < state.size(); ++i) {
    EncodedTensor t = EncodeTensor(state.tensor(i), config);
    encoded.decoded.mutable_tensor(i) = std::move(t.decoded);
    encoded.bytes += t.bytes;
  }
  return encoded;
}

EncodedState EncodeWithErrorFeedback(const ModelState& message, const CodecConfig& config,
                                     ModelState& residual) {
  const ModelState total =
      residual.empty() ? message : ModelState::Sum(message, 1.0, 1.0, residual);
  EncodedState encoded = Encode(total, config);
  residual = ModelState::Difference(total, encoded.decoded);
  return encoded;
}

}  // namespace fl
