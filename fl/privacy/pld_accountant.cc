#include "fl/privacy/pld_accountant.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace fl::privacy {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// A one-step grid larger than this is refused: it would take gigabytes once composed.
constexpr int64_t kMaxGridPoints = 4'000'000;
// A composed window larger than this is refused: its transforms take about four
// times its length in doubles (about 0.5 GB at this size).
constexpr int64_t kMaxTransformPoints = int64_t{1} << 24;

double NormalCdf(double t) { return 0.5 * std::erfc(-t / std::sqrt(2.0)); }
double NormalSurvival(double t) { return 0.5 * std::erfc(t / std::sqrt(2.0)); }

// t with NormalSurvival(t) = mass, for mass in (0, 0.5): bisection on erfc.
double UpperQuantile(double mass) {
  double lo = 0.0;
  double hi = 40.0;  // NormalSurvival(40) underflows every mass a double holds
  for (int i = 0; i < 200 && hi - lo > 1e-12; ++i) {
    const double mid = 0.5 * (lo + hi);
    (NormalSurvival(mid) > mass ? lo : hi) = mid;
  }
  return hi;
}

double LogAddExp(double a, double b) {
  if (a == -kInfinity) return b;
  if (b == -kInfinity) return a;
  const double high = std::max(a, b);
  return high + std::log1p(std::exp(std::min(a, b) - high));
}

// One step of the Gaussian mechanism (sensitivity 1, noise sigma) run with
// probability q. With u = (2x - 1) / (2 sigma^2), the removal loss at output x is
// log(1 - q + q e^u) (x drawn from the mixture), the addition loss its negative
// (x drawn from N(0, sigma^2)).
class SubsampledGaussian {
 public:
  SubsampledGaussian(double q, double sigma) : q_(q), sigma_(sigma) {}

  double RemovalLoss(double x) const {
    const double u = (2 * x - 1) / (2 * sigma_ * sigma_);
    return LogAddExp(std::log1p(-q_), std::log(q_) + u);
  }

  // The output x at which the removal loss is eps (for eps > log(1 - q)).
  double RemovalInverse(double eps) const {
    return sigma_ * sigma_ * (std::log(std::expm1(eps) + q_) - std::log(q_)) + 0.5;
  }
  // The output x at which the addition loss is eps (for eps < -log(1 - q)).
  double AdditionInverse(double eps) const { return RemovalInverse(-eps); }

  // delta(eps) = P(L > eps) - e^eps Q(L > eps), in closed form.
  double RemovalDelta(double eps) const {
    if (q_ < 1 && eps <= std::log1p(-q_)) return -std::expm1(eps);  // every loss exceeds eps
    const double x = RemovalInverse(eps);
    const double value = q_ * NormalSurvival((x - 1) / sigma_) -
                         (std::expm1(eps) + q_) * NormalSurvival(x / sigma_);
    return std::clamp(value, 0.0, 1.0);
  }
  double AdditionDelta(double eps) const {
    if (q_ < 1 && eps >= -std::log1p(-q_)) return 0.0;  // no loss exceeds -log(1 - q)
    const double x = AdditionInverse(eps);
    const double value = NormalCdf(x / sigma_) * (1 - std::exp(eps) * (1 - q_)) -
                         std::exp(eps) * q_ * NormalCdf((x - 1) / sigma_);
    return std::clamp(value, 0.0, 1.0);
  }

  double sigma() const { return sigma_; }

 private:
  double q_;
  double sigma_;
};

// Connect the dots (Doroshenko et al. 2022, Algorithm 1) on the grid points
// lower_index..upper_index: masses whose delta(eps) equals `delta` at every grid
// point and lies above it in between; what is above the last point is +infinity.
DiscretePld ConnectTheDots(int64_t lower_index, int64_t upper_index, double interval,
                           const std::function<double(double)>& delta) {
  const int64_t n = upper_index - lower_index + 1;
  std::vector<double> deltas(n);
  for (int64_t i = 0; i < n; ++i) {
    deltas[i] = delta(static_cast<double>(lower_index + i) * interval);
    if (i > 0) deltas[i] = std::min(deltas[i], deltas[i - 1]);  // non-increasing
  }
  DiscretePld pld;
  pld.lower_index = lower_index;
  pld.infinity_mass = deltas.back();
  pld.mass.assign(n, 0.0);
  if (n == 1) {
    pld.mass[0] = 1 - deltas[0];
    return pld;
  }
  const double grow = std::exp(interval);
  const double expm1 = std::expm1(interval);
  pld.mass[0] = 1 - deltas[0] + (deltas[1] - deltas[0]) / expm1;
  for (int64_t i = 1; i + 1 < n; ++i) {
    pld.mass[i] = ((deltas[i + 1] - deltas[i]) - grow * (deltas[i] - deltas[i - 1])) / expm1;
  }
  pld.mass[n - 1] = (deltas[n - 1] - deltas[n - 2]) / std::expm1(-interval);
  for (double& m : pld.mass) m = std::max(m, 0.0);
  return pld;
}

// Moves the lowest losses holding at most `tail` in all onto the lowest loss
// kept, and the highest ones onto +infinity: both only raise delta(eps).
void TruncateTails(double tail, DiscretePld& pld) {
  std::vector<double>& mass = pld.mass;
  size_t begin = 0;
  double low = 0.0;
  while (begin + 1 < mass.size() && low + mass[begin] <= tail) low += mass[begin++];
  size_t end = mass.size();
  double high = 0.0;
  while (end > begin + 1 && high + mass[end - 1] <= tail) high += mass[--end];
  mass[begin] += low;
  pld.infinity_mass += high;
  mass.erase(mass.begin() + static_cast<std::ptrdiff_t>(end), mass.end());
  mass.erase(mass.begin(), mass.begin() + static_cast<std::ptrdiff_t>(begin));
  pld.lower_index += static_cast<int64_t>(begin);
}

// The PLD of the two composed: losses add, so masses convolve (by FFT).
DiscretePld Convolve(const DiscretePld& a, const DiscretePld& b, double tail) {
  const auto na = static_cast<int64_t>(a.mass.size());
  const auto nb = static_cast<int64_t>(b.mass.size());
  const int64_t size = na + nb - 1;
  DiscretePld out;
  out.lower_index = a.lower_index + b.lower_index;
  out.infinity_mass = a.infinity_mass + b.infinity_mass - a.infinity_mass * b.infinity_mass;
  if (std::min(na, nb) <= 32) {  // direct: cheaper than two transforms
    out.mass.assign(size, 0.0);
    for (int64_t i = 0; i < na; ++i) {
      for (int64_t j = 0; j < nb; ++j) out.mass[i + j] += a.mass[i] * b.mass[j];
    }
  } else {
    int64_t fft_size = 1;
    while (fft_size < size) fft_size *= 2;
    const auto options = at::TensorOptions().dtype(at::kDouble);
    const at::Tensor ta = at::from_blob(const_cast<double*>(a.mass.data()), {na}, options);
    const at::Tensor tb = at::from_blob(const_cast<double*>(b.mass.data()), {nb}, options);
    const at::Tensor product = at::fft_rfft(ta, fft_size) * at::fft_rfft(tb, fft_size);
    const at::Tensor result = at::fft_irfft(product, fft_size).narrow(0, 0, size).contiguous();
    out.mass.assign(result.data_ptr<double>(), result.data_ptr<double>() + size);
    for (double& m : out.mass) m = std::max(m, 0.0);  // transform round-off
  }
  TruncateTails(tail, out);
  return out;
}

// ln sum_i e^(log_mass_i + order i): the finite mass's moment generating
// function over its grid offsets i, from the masses' logarithms.
double LogMomentGeneratingFunction(const std::vector<double>& log_mass, double order) {
  double high = -kInfinity;
  for (size_t i = 0; i < log_mass.size(); ++i) {
    high = std::max(high, log_mass[i] + order * static_cast<double>(i));
  }
  if (high == -kInfinity) return -kInfinity;
  double sum = 0.0;
  for (size_t i = 0; i < log_mass.size(); ++i) {
    sum += std::exp(log_mass[i] + order * static_cast<double>(i) - high);
  }
  return high + std::log(sum);
}

// The offsets [lower, upper] (from `times` times the lowest) outside which the
// sum of `times` draws from `mass` falls with probability at most tail / 2 on
// each side, by Chernoff's bound P(S >= t) <= e^(-order t) M(order)^times over
// orders on a geometric grid (dp_accounting's compute_self_convolve_bounds, on
// more orders).
std::pair<int64_t, int64_t> ChernoffWindow(const std::vector<double>& mass, int64_t times,
                                           double tail) {
  const auto n = static_cast<double>(mass.size());
  int64_t lower = 0;
  int64_t upper = static_cast<int64_t>(mass.size() - 1) * times;
  if (tail <= 0) return {lower, upper};
  const double log_two_over_tail = std::log(2 / tail);
  std::vector<double> log_mass(mass.size());
  for (size_t i = 0; i < mass.size(); ++i) log_mass[i] = std::log(mass[i]);  // -inf for 0
  for (int j = -40; j <= 40; ++j) {  // orders 2^(j/4) / n: 2^-10 / n to 2^10 / n
    const double magnitude = std::exp2(j / 4.0) / n;
    for (const double order : {magnitude, -magnitude}) {
      const double bound =
          (static_cast<double>(times) * LogMomentGeneratingFunction(log_mass, order) +
           log_two_over_tail) / order;
      if (!std::isfinite(bound)) continue;
      if (order > 0) upper = std::min(upper, static_cast<int64_t>(std::ceil(bound)));
      if (order < 0) lower = std::max(lower, static_cast<int64_t>(std::floor(bound)));
    }
  }
  return {lower, std::max(lower, upper)};
}

// `times` compositions of `base` at once: one transform of the masses folded
// onto a window bounded by Chernoff, raised to the power `times`, transformed
// back (as dp_accounting's self_convolve). Memory is the window's, not the
// composed support's: mass outside it (at most tail in all) aliases into it,
// and the upper tail's bound is added to +infinity, so delta(eps) only rises.
absl::StatusOr<DiscretePld> SelfCompose(const DiscretePld& base, int64_t times, double tail,
                                        double interval) {
  if (times == 1) return base;
  const auto [lower, upper] = ChernoffWindow(base.mass, times, tail);
  const int64_t window = upper - lower + 1;
  if (window > kMaxTransformPoints) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "steps: ", times, " steps spread the privacy loss over ", window,
        " grid points at value_discretization_interval ", interval, " (at most ",
        kMaxTransformPoints, "): raise the interval, or account this run by RDP"));
  }
  int64_t fft_size = 1;
  while (fft_size < window) fft_size *= 2;
  std::vector<double> folded(fft_size, 0.0);
  for (size_t i = 0; i < base.mass.size(); ++i) folded[i % fft_size] += base.mass[i];
  const auto options = at::TensorOptions().dtype(at::kDouble);
  const at::Tensor spectrum = at::fft_rfft(at::from_blob(folded.data(), {fft_size}, options));
  const at::Tensor composed = at::fft_irfft(at::pow(spectrum, times), fft_size).contiguous();
  const double* values = composed.data_ptr<double>();

  DiscretePld out;
  out.lower_index = base.lower_index * times + lower;
  out.mass.resize(window);
  for (int64_t t = 0; t < window; ++t) {
    out.mass[t] = std::max(values[(lower + t) % fft_size], 0.0);  // transform round-off
  }
  out.infinity_mass = -std::expm1(static_cast<double>(times) * std::log1p(-base.infinity_mass));
  if (upper < static_cast<int64_t>(base.mass.size() - 1) * times) out.infinity_mass += tail / 2;
  TruncateTails(tail, out);
  return out;
}

}  // namespace

double HockeyStickDivergence(const DiscretePld& pld, double interval, double epsilon) {
  double delta = pld.infinity_mass;
  for (size_t i = 0; i < pld.mass.size(); ++i) {
    const double loss = static_cast<double>(pld.lower_index + static_cast<int64_t>(i)) * interval;
    if (loss > epsilon) delta += pld.mass[i] * -std::expm1(epsilon - loss);
  }
  return delta;
}

double SmallestEpsilon(const DiscretePld& pld, double interval, double delta) {
  if (pld.infinity_mass > delta) return kInfinity;
  // Walking down the grid: above = mass above grid point i (with +infinity's),
  // scaled = the sum of mass_j e^(loss_i - loss_j) over those j, so that
  // delta(eps) = above - e^(eps - loss_i) scaled on (loss_i, loss_{i+1}].
  const double shrink = std::exp(-interval);
  double above = pld.infinity_mass;
  double scaled = 0.0;
  for (auto i = static_cast<int64_t>(pld.mass.size()) - 1; i >= 0; --i) {
    above += pld.mass[i];
    scaled = (scaled + pld.mass[i]) * shrink;  // now relative to grid point i - 1
    const double loss_below = static_cast<double>(pld.lower_index + i - 1) * interval;
    if (above - scaled > delta || i == 0) {
      // delta(eps) crosses `delta` in (loss_{i-1}, loss_i], or below loss_0.
      return std::max(0.0, loss_below + std::log((above - delta) / scaled));
    }
  }
  return 0.0;  // no finite mass: delta(eps) = infinity_mass <= delta everywhere
}

PldAccountant::PldAccountant() : PldAccountant(PldOptions()) {}

absl::StatusOr<PldAccountant> PldAccountant::Create(const PldOptions& options) {
  if (!(options.value_discretization_interval > 0) ||
      !std::isfinite(options.value_discretization_interval)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value_discretization_interval: must be > 0 and finite, got ",
        options.value_discretization_interval));
  }
  if (!(options.log_mass_truncation_bound < 0) ||
      !std::isfinite(options.log_mass_truncation_bound)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "log_mass_truncation_bound: must be < 0 and finite, got ",
        options.log_mass_truncation_bound));
  }
  if (!(options.tail_mass_truncation >= 0 && options.tail_mass_truncation <= 1e-3)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tail_mass_truncation: must be in [0, 1e-3], got ", options.tail_mass_truncation));
  }
  return PldAccountant(options);
}

absl::Status PldAccountant::Compose(double sampling_rate, double noise_multiplier,
                                    int64_t steps, Sampling sampling) {
  if (sampling != Sampling::kPoisson) {
    return absl::UnimplementedError(
        "the PLD accountant covers Poisson sampling (add/remove-one) only; fixed-size "
        "cohorts (replace-one) are accounted by RdpAccountant");
  }
  if (!(sampling_rate >= 0 && sampling_rate <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampling_rate: must be in [0, 1], got ", sampling_rate));
  }
  if (!(noise_multiplier >= 0) || !std::isfinite(noise_multiplier)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "noise_multiplier: must be finite and >= 0, got ", noise_multiplier));
  }
  if (steps < 0) return absl::InvalidArgumentError(absl::StrCat("steps: must be >= 0, got ", steps));
  if (steps == 0 || sampling_rate == 0) return absl::OkStatus();
  if (noise_multiplier == 0) {
    non_private_ = true;
    return absl::OkStatus();
  }

  const SubsampledGaussian step(sampling_rate, noise_multiplier);
  const double interval = options_.value_discretization_interval;
  // The noise's outputs kept: each tail beyond holds exp(bound) / 2.
  const double reach =
      noise_multiplier * UpperQuantile(std::exp(options_.log_mass_truncation_bound) / 2);
  // Removal: x from the mixture, over [-reach, 1 + reach]; the loss rises with x.
  // Addition: x from N(0, sigma^2), over [-reach, reach]; the loss falls with x.
  const double removal_low = step.RemovalLoss(-reach);
  const double removal_high = step.RemovalLoss(1 + reach);
  const double addition_low = -step.RemovalLoss(reach);
  const double addition_high = -step.RemovalLoss(-reach);
  const auto grid = [&](double low, double high) {
    return std::make_pair(static_cast<int64_t>(std::floor(low / interval)),
                          static_cast<int64_t>(std::ceil(high / interval)));
  };
  const auto [removal_begin, removal_end] = grid(removal_low, removal_high);
  const auto [addition_begin, addition_end] = grid(addition_low, addition_high);
  const int64_t points =
      std::max(removal_end - removal_begin, addition_end - addition_begin) + 1;
  if (points > kMaxGridPoints) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "noise_multiplier ", noise_multiplier, " at value_discretization_interval ", interval,
        " needs ", points, " grid points for one step (at most ", kMaxGridPoints,
        "): raise the interval"));
  }
  const double tail = options_.tail_mass_truncation;
  DiscretePld removal = ConnectTheDots(removal_begin, removal_end, interval,
                                       [&](double eps) { return step.RemovalDelta(eps); });
  DiscretePld addition = ConnectTheDots(addition_begin, addition_end, interval,
                                        [&](double eps) { return step.AdditionDelta(eps); });
  absl::StatusOr<DiscretePld> removals = SelfCompose(removal, steps, tail, interval);
  if (!removals.ok()) return removals.status();
  absl::StatusOr<DiscretePld> additions = SelfCompose(addition, steps, tail, interval);
  if (!additions.ok()) return additions.status();
  remove_ = Convolve(remove_, *removals, tail);
  add_ = Convolve(add_, *additions, tail);
  return absl::OkStatus();
}

absl::StatusOr<PldAccountant::Directions> PldAccountant::EpsilonByDirection(double delta) const {
  if (!(delta > 0 && delta < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("delta: must be in (0, 1), got ", delta));
  }
  if (non_private_) return Directions{kInfinity, kInfinity};
  const double interval = options_.value_discretization_interval;
  return Directions{SmallestEpsilon(remove_, interval, delta),
                    SmallestEpsilon(add_, interval, delta)};
}

absl::StatusOr<double> PldAccountant::Epsilon(double delta) const {
  absl::StatusOr<Directions> directions = EpsilonByDirection(delta);
  if (!directions.ok()) return directions.status();
  return std::max(directions->removal, directions->addition);
}

absl::StatusOr<double> PldAccountant::Delta(double epsilon) const {
  if (!(epsilon >= 0) || !std::isfinite(epsilon)) {
    return absl::InvalidArgumentError(
        absl::StrCat("epsilon: must be >= 0 and finite, got ", epsilon));
  }
  if (non_private_) return 1.0;
  const double interval = options_.value_discretization_interval;
  return std::max(HockeyStickDivergence(remove_, interval, epsilon),
                  HockeyStickDivergence(add_, interval, epsilon));
}

}  // namespace fl::privacy
