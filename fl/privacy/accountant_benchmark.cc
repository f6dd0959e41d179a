// What accounting T steps of the Poisson-subsampled Gaussian costs, for each
// accountant, at q = 0.001, z = 0.8 (a long DP-SGD or cross-device run): time per
// Compose(T) + Epsilon(1e-5); counters:
//   epsilon      what it accounted, to compare the accountants
//   max_rss_mb   the process's peak resident memory so far (LibTorch's share
//                included, about 160 MB): the runs go in ascending T
//
//   bazel run -c opt //fl/privacy:accountant_benchmark

#include <sys/resource.h>

#include <cstdint>

#include "benchmark/benchmark.h"
#include "fl/privacy/pld_accountant.h"
#include "fl/privacy/rdp_accountant.h"
#include "glog/logging.h"

namespace fl::privacy {
namespace {

constexpr double kSamplingRate = 0.001;
constexpr double kNoiseMultiplier = 0.8;
constexpr double kDelta = 1e-5;

double MaxRssMb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;
}

void BM_PldSteps(benchmark::State& state) {
  double epsilon = 0;
  for (auto _ : state) {
    PldAccountant accountant;
    const absl::Status composed =
        accountant.Compose(kSamplingRate, kNoiseMultiplier, state.range(0), Sampling::kPoisson);
    CHECK(composed.ok()) << composed;
    epsilon = *accountant.Epsilon(kDelta);
  }
  state.counters["epsilon"] = epsilon;
  state.counters["max_rss_mb"] = MaxRssMb();
}
BENCHMARK(BM_PldSteps)->Arg(1000)->Arg(16000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_RdpSteps(benchmark::State& state) {
  double epsilon = 0;
  for (auto _ : state) {
    RdpAccountant accountant;
    const absl::Status composed =
        accountant.Compose(kSamplingRate, kNoiseMultiplier, state.range(0), Sampling::kPoisson);
    CHECK(composed.ok()) << composed;
    epsilon = accountant.Epsilon(kDelta)->epsilon;
  }
  state.counters["epsilon"] = epsilon;
  state.counters["max_rss_mb"] = MaxRssMb();
}
BENCHMARK(BM_RdpSteps)->Arg(1000)->Arg(16000)->Arg(100000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace fl::privacy

BENCHMARK_MAIN();
