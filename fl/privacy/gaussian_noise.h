#ifndef FL_PRIVACY_GAUSSIAN_NOISE_H_
#define FL_PRIVACY_GAUSSIAN_NOISE_H_

// Where differential privacy's Gaussian noise comes from.
//
// Secure (the default everywhere): a ChaCha20 keystream under a 256-bit key
// drawn from the operating system (OpenSSL's RAND_bytes), turned Gaussian by the
// Box-Muller transform in double precision. Nobody who holds the spec, its seed
// or the run's outputs can recompute it, the server included.
//
// Reproducible (a simulation's explicit choice): LibTorch's generator under a
// 64-bit seed derived from the spec's seed, so that a run repeats bit for bit.
// Anyone who holds the spec can subtract that noise again: it protects nothing
// against the server, a reader of spec.textproto, or the report.
//
// Not addressed: floating-point Gaussian samplers leak through their low bits
// (Mironov 2012 for the Laplace mechanism); a discrete Gaussian would close that.

#include <cstdint>
#include <memory>
#include <optional>

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include "absl/status/statusor.h"
#include "fl/secagg/prg.h"

namespace fl::privacy {

class GaussianNoise {
 public:
  // Keyed from the operating system. Errors: the OS has no entropy to give.
  static absl::StatusOr<GaussianNoise> Secure();
  // The secure stream under a known key, for tests.
  static GaussianNoise SecureFromKey(const secagg::Seed& key);
  static GaussianNoise Reproducible(uint64_t seed);

  GaussianNoise(GaussianNoise&&) noexcept;
  GaussianNoise& operator=(GaussianNoise&&) noexcept;
  ~GaussianNoise();

  // N(0, stddev^2) shaped as `like`, in its dtype, on its device.
  at::Tensor Like(const at::Tensor& like, double stddev);
  double Scalar(double stddev);
  bool reproducible() const { return generator_.has_value(); }

 private:
  GaussianNoise() = default;
  // `count` standard normals in double precision, on the CPU.
  at::Tensor StandardNormals(int64_t count);

  std::optional<at::Generator> generator_;
  std::unique_ptr<secagg::Prg> prg_;
};

}  // namespace fl::privacy

#endif  // FL_PRIVACY_GAUSSIAN_NOISE_H_
