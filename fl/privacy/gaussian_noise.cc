#include "fl/privacy/gaussian_noise.h"

#include <cmath>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"

namespace fl::privacy {

GaussianNoise::GaussianNoise(GaussianNoise&&) noexcept = default;
GaussianNoise& GaussianNoise::operator=(GaussianNoise&&) noexcept = default;
GaussianNoise::~GaussianNoise() = default;

absl::StatusOr<GaussianNoise> GaussianNoise::Secure() {
  absl::StatusOr<secagg::Seed> key = secagg::OsSeed();
  if (!key.ok()) return absl::UnavailableError(absl::StrCat("DP noise: ", key.status().message()));
  return SecureFromKey(*key);
}

GaussianNoise GaussianNoise::SecureFromKey(const secagg::Seed& key) {
  GaussianNoise noise;
  noise.prg_ = std::make_unique<secagg::Prg>(key);
  return noise;
}

GaussianNoise GaussianNoise::Reproducible(uint64_t seed) {
  GaussianNoise noise;
  noise.generator_ = at::make_generator<at::CPUGeneratorImpl>(seed);
  return noise;
}

at::Tensor GaussianNoise::StandardNormals(int64_t count) {
  // Box-Muller: two uniforms of 53 bits each (u1 in (0, 1], u2 in [0, 1)) give two
  // independent standard normals.
  const int64_t pairs = (count + 1) / 2;
  std::vector<uint32_t> words(static_cast<size_t>(4 * pairs));
  prg_->Words(words.data(), words.size());
  at::Tensor u1 = at::empty({pairs}, at::kDouble);
  at::Tensor u2 = at::empty({pairs}, at::kDouble);
  double* a = u1.data_ptr<double>();
  double* b = u2.data_ptr<double>();
  constexpr double kUnit = 1.0 / 9007199254740992.0;  // 2^-53
  for (int64_t i = 0; i < pairs; ++i) {
    const uint64_t w1 = uint64_t{words[4 * i]} | uint64_t{words[4 * i + 1]} << 32;
    const uint64_t w2 = uint64_t{words[4 * i + 2]} | uint64_t{words[4 * i + 3]} << 32;
    a[i] = static_cast<double>((w1 >> 11) + 1) * kUnit;
    b[i] = static_cast<double>(w2 >> 11) * kUnit;
  }
  const at::Tensor radius = at::sqrt(-2.0 * at::log(u1));
  const at::Tensor angle = (2.0 * M_PI) * u2;
  return at::cat({radius * at::cos(angle), radius * at::sin(angle)}).narrow(0, 0, count);
}

at::Tensor GaussianNoise::Like(const at::Tensor& like, double stddev) {
  at::Tensor noise;
  if (generator_.has_value()) {
    noise = at::empty(like.sizes(), at::TensorOptions(at::kCPU).dtype(like.scalar_type()));
    noise.normal_(0.0, stddev, *generator_);
  } else {
    noise = (StandardNormals(like.numel()) * stddev).to(like.scalar_type()).view(like.sizes());
  }
  return noise.to(like.device());
}

double GaussianNoise::Scalar(double stddev) {
  if (generator_.has_value()) {
    return at::empty({}, at::kDouble).normal_(0.0, stddev, *generator_).item<double>();
  }
  return StandardNormals(1).item<double>() * stddev;
}

}  // namespace fl::privacy
