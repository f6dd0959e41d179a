// The privacy a DP run spends, or the noise it needs: Rényi-DP accounting of T
// steps of the subsampled Gaussian mechanism (fl/privacy/rdp_accountant.h), or
// with --accountant=pld their privacy loss distribution (fl/privacy/pld_accountant.h).
//
//   bazel run //tools:dp_accountant -- --sampling_rate=0.0025 --noise_multiplier=1.3
//       --steps=6000 --delta=1e-5 [--sampling=poisson|fixed_size] [--conversion=cks|classic]
//   epsilon 0.724223402611 at order 19
//   (noise multiplier 1.3; delta 1e-05; 6000 steps, poisson sampling at rate 0.0025; ...)
//
//   bazel run //tools:dp_accountant -- --sampling_rate=0.0025 --target_epsilon=1
//       --steps=6000 --delta=1e-5
//   noise_multiplier ... (epsilon ... at order ...; the smallest to within 1e-06 relative)
//
// --sampling=poisson (the default) is each client (or example) joining a step
// independently with probability q, and gives add/remove-one DP; fixed_size is m of
// n drawn without replacement, q = m / n, and gives replace-one DP.
//
// --accountant=pld (Poisson sampling only) is tighter than RDP:
//   bazel run //tools:dp_accountant -- --sampling_rate=0.0025 --noise_multiplier=1.3
//       --steps=6000 --delta=1e-5 --accountant=pld
//   epsilon 0.640110926584 (pld: removal 0.640110926584, addition ...)
//
// Exit codes: 0 done, 1 the target epsilon cannot be met with a noise multiplier
// up to 10000, 2 the command line is wrong (one line on stderr naming the flag).

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "fl/privacy/noise_search.h"
#include "fl/privacy/pld_accountant.h"
#include "fl/privacy/rdp_accountant.h"
#include "fl/privacy/rdp_conversion.h"
#include "glog/logging.h"

// Numbers are read as strings so that a malformed one is this tool's error (exit
// 2, naming the flag) rather than absl's (exit 1).
ABSL_FLAG(std::string, sampling_rate, "",
          "Probability q that a client (or example) takes part in a step; with "
          "--sampling=fixed_size the cohort fraction m / n. In [0, 1]. Required.");
ABSL_FLAG(std::string, noise_multiplier, "",
          "Gaussian noise standard deviation over the L2 sensitivity (clipping norm), "
          ">= 0. Give this or --target_epsilon.");
ABSL_FLAG(std::string, target_epsilon, "",
          "Instead of --noise_multiplier: print the smallest noise multiplier whose "
          "epsilon is at most this (> 0).");
ABSL_FLAG(std::string, steps, "", "Number of steps (rounds), an integer >= 0. Required.");
ABSL_FLAG(std::string, delta, "", "Target delta, in (0, 1). Required.");
ABSL_FLAG(std::string, sampling, "poisson",
          "poisson (add/remove-one guarantee) or fixed_size (replace-one guarantee).");
ABSL_FLAG(std::string, accountant, "rdp",
          "rdp (Renyi DP over a list of orders) or pld (privacy loss distributions: "
          "tighter; Poisson sampling only).");
ABSL_FLAG(std::string, value_discretization_interval, "1e-4",
          "With --accountant=pld: the loss grid's spacing (> 0); smaller is tighter and "
          "slower.");
ABSL_FLAG(std::string, conversion, "cks",
          "RDP to (epsilon, delta): cks (Canonne-Kamath-Steinke 2020, tighter) or classic "
          "(Mironov 2017).");

namespace {

using fl::privacy::Conversion;
using fl::privacy::Sampling;

constexpr absl::string_view kUsageFlags[] = {
    "help", "helpfull", "helpshort", "helppackage", "helpon", "helpmatch", "only_check_args",
    "version",
};

constexpr int kExitCannotMeet = 1;
constexpr int kExitUsage = 2;

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "%s\n", std::string(message).c_str());
  return kExitUsage;
}

// absl's parser exits with status 1 on an unknown flag or a flag missing its
// value; this tool promises 2 for every command-line mistake, so it looks first.
std::optional<std::string> CommandLineMistake(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;  // positional: refused after parsing
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const size_t equals = arg.find('=');
    const absl::string_view name = arg.substr(0, equals);
    // absl's usage flags are not in its registry (Abseil 20220623); its parser
    // knows them by name.
    if (absl::c_linear_search(kUsageFlags, name)) continue;
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && !flag->IsOfType<bool>()) flag = nullptr;
      if (flag != nullptr) continue;
    }
    if (flag == nullptr) return absl::StrCat("unknown flag --", name, "; see --help");
    if (equals == absl::string_view::npos && !flag->IsOfType<bool>()) {
      if (i + 1 == argc) return absl::StrCat("--", name, ": needs a value");
      ++i;  // "--flag value"
    }
  }
  return std::nullopt;
}

absl::StatusOr<double> ParseDouble(absl::string_view flag, const std::string& text) {
  double value = 0;
  if (!absl::SimpleAtod(text, &value)) {
    return absl::InvalidArgumentError(absl::StrCat(flag, ": must be a number, got \"", text, "\""));
  }
  return value;
}

// The library's messages start with the argument's name, which is the flag's.
int Fail(const absl::Status& status) {
  const std::string line = absl::StrCat("--", status.message());
  if (status.code() == absl::StatusCode::kOutOfRange) {
    std::fprintf(stderr, "%s\n", line.c_str());
    return kExitCannotMeet;
  }
  return UsageError(line);
}

absl::StatusOr<fl::privacy::EpsilonAndOrder> Spent(double q, double z, int64_t steps,
                                                   double delta, Sampling sampling,
                                                   Conversion conversion) {
  fl::privacy::RdpAccountant accountant;
  // Delta first (cheap on the empty accountant), so that a bad one is reported
  // before the work and any warning it logs.
  if (absl::Status status = accountant.Epsilon(delta, conversion).status(); !status.ok()) {
    return status;
  }
  if (absl::Status status = accountant.Compose(q, z, steps, sampling); !status.ok()) {
    return status;
  }
  return accountant.Epsilon(delta, conversion);
}

std::string Setting(double q, int64_t steps, double delta, Sampling sampling,
                    Conversion conversion) {
  return absl::StrFormat(
      "delta %g; %d steps, %s sampling at rate %g; %s conversion; %s guarantee", delta, steps,
      fl::privacy::SamplingName(sampling), q, fl::privacy::ConversionName(conversion),
      sampling == Sampling::kPoisson ? "add/remove-one" : "replace-one");
}

std::string PldSetting(double q, int64_t steps, double delta,
                       const fl::privacy::PldOptions& options) {
  return absl::StrFormat(
      "delta %g; %d steps, poisson sampling at rate %g; privacy loss distributions, grid "
      "%g, connect the dots; add/remove-one guarantee",
      delta, steps, q, options.value_discretization_interval);
}

// --accountant=pld: epsilon for --noise_multiplier, or the noise for --target_epsilon.
int MainPld(double q, int64_t steps, double delta, Sampling sampling,
            const std::string& noise_text, const std::string& target_text) {
  if (sampling != Sampling::kPoisson) {
    return UsageError(
        "--accountant: pld covers --sampling=poisson only; use --accountant=rdp for fixed_size");
  }
  fl::privacy::PldOptions options;
  const absl::StatusOr<double> interval = ParseDouble(
      "value_discretization_interval", absl::GetFlag(FLAGS_value_discretization_interval));
  if (!interval.ok()) return Fail(interval.status());
  options.value_discretization_interval = *interval;
  absl::StatusOr<fl::privacy::PldAccountant> empty = fl::privacy::PldAccountant::Create(options);
  if (!empty.ok()) return Fail(empty.status());
  if (absl::Status status = empty->Epsilon(delta).status(); !status.ok()) return Fail(status);
  const std::string setting = PldSetting(q, steps, delta, options);
  const auto spent = [&](double z) -> absl::StatusOr<fl::privacy::PldAccountant::Directions> {
    fl::privacy::PldAccountant accountant = *empty;
    if (absl::Status status = accountant.Compose(q, z, steps, sampling); !status.ok()) {
      return status;
    }
    return accountant.EpsilonByDirection(delta);
  };

  if (!noise_text.empty()) {
    const absl::StatusOr<double> z = ParseDouble("noise_multiplier", noise_text);
    if (!z.ok()) return Fail(z.status());
    const auto directions = spent(*z);
    if (!directions.ok()) return Fail(directions.status());
    std::printf("epsilon %.12g (pld: removal %.12g, addition %.12g)\n(noise multiplier %g; %s)\n",
                std::max(directions->removal, directions->addition), directions->removal,
                directions->addition, *z, setting.c_str());
    return 0;
  }
  const absl::StatusOr<double> target = ParseDouble("target_epsilon", target_text);
  if (!target.ok()) return Fail(target.status());
  FLAGS_minloglevel = google::GLOG_ERROR;  // as for RDP: the bracket's RDP start
  const fl::privacy::NoiseSearchOptions search;
  const auto found =
      fl::privacy::SmallestNoiseMultiplierPld(*target, q, steps, delta, options, search);
  if (!found.ok()) return Fail(found.status());
  const std::string z_text = absl::StrFormat("%.9g", found->noise_multiplier * (1 + 1e-8));
  double z = 0;
  CHECK(absl::SimpleAtod(z_text, &z)) << z_text;
  const auto directions = spent(z);
  CHECK(directions.ok()) << directions.status();
  std::printf(
      "noise_multiplier %s (epsilon %.12g, pld; the smallest to within %g relative)\n"
      "(target epsilon %g; %s)\n",
      z_text.c_str(), std::max(directions->removal, directions->addition),
      search.relative_tolerance, *target, setting.c_str());
  return 0;
}

int Main() {
  const std::pair<const char*, std::string> required[] = {
      {"sampling_rate", absl::GetFlag(FLAGS_sampling_rate)},
      {"steps", absl::GetFlag(FLAGS_steps)},
      {"delta", absl::GetFlag(FLAGS_delta)},
  };
  for (const auto& [name, value] : required) {
    if (value.empty()) return UsageError(absl::StrCat("--", name, ": required; see --help"));
  }
  const std::string noise_text = absl::GetFlag(FLAGS_noise_multiplier);
  const std::string target_text = absl::GetFlag(FLAGS_target_epsilon);
  if (noise_text.empty() == target_text.empty()) {
    return UsageError(noise_text.empty()
                          ? "--noise_multiplier: required, or --target_epsilon instead"
                          : "--target_epsilon: give it or --noise_multiplier, not both");
  }

  const absl::StatusOr<double> q = ParseDouble("sampling_rate", absl::GetFlag(FLAGS_sampling_rate));
  if (!q.ok()) return Fail(q.status());
  const absl::StatusOr<double> delta = ParseDouble("delta", absl::GetFlag(FLAGS_delta));
  if (!delta.ok()) return Fail(delta.status());
  int64_t steps = 0;
  if (const std::string text = absl::GetFlag(FLAGS_steps); !absl::SimpleAtoi(text, &steps)) {
    return UsageError(absl::StrCat("--steps: must be an integer, got \"", text, "\""));
  }
  const absl::StatusOr<Sampling> sampling =
      fl::privacy::ParseSampling(absl::GetFlag(FLAGS_sampling));
  if (!sampling.ok()) return Fail(sampling.status());
  const std::string accountant = absl::GetFlag(FLAGS_accountant);
  if (accountant == "pld") {
    if (absl::GetFlag(FLAGS_conversion) != "cks") {
      return UsageError("--conversion: RDP's; --accountant=pld converts nothing");
    }
    return MainPld(*q, steps, *delta, *sampling, noise_text, target_text);
  }
  if (accountant != "rdp") {
    return UsageError(absl::StrCat("--accountant: must be rdp or pld, got \"", accountant, "\""));
  }
  if (absl::GetFlag(FLAGS_value_discretization_interval) != "1e-4") {
    return UsageError("--value_discretization_interval: only read with --accountant=pld");
  }
  const absl::StatusOr<Conversion> conversion =
      fl::privacy::ParseConversion(absl::GetFlag(FLAGS_conversion));
  if (!conversion.ok()) return Fail(conversion.status());
  const std::string setting = Setting(*q, steps, *delta, *sampling, *conversion);

  if (!noise_text.empty()) {
    const absl::StatusOr<double> z = ParseDouble("noise_multiplier", noise_text);
    if (!z.ok()) return Fail(z.status());
    const auto spent = Spent(*q, *z, steps, *delta, *sampling, *conversion);
    if (!spent.ok()) return Fail(spent.status());
    std::printf("epsilon %.12g at order %g\n(noise multiplier %g; %s)\n", spent->epsilon,
                spent->order, *z, setting.c_str());
    return 0;
  }

  const absl::StatusOr<double> target = ParseDouble("target_epsilon", target_text);
  if (!target.ok()) return Fail(target.status());
  // The search probes small noise multipliers, where the series of some
  // fractional orders do not converge; that is expected there, not worth a warning.
  FLAGS_minloglevel = google::GLOG_ERROR;
  const fl::privacy::NoiseSearchOptions options;
  const auto found = fl::privacy::SmallestNoiseMultiplier(*target, *q, steps, *delta, *sampling,
                                                          *conversion, options);
  if (!found.ok()) return Fail(found.status());
  // Printed rounded up (by at most 1.5e-8 relative), so that the printed value
  // itself meets the target; its epsilon is recomputed for the same reason.
  const std::string z_text = absl::StrFormat("%.9g", found->noise_multiplier * (1 + 1e-8));
  double z = 0;
  CHECK(absl::SimpleAtod(z_text, &z)) << z_text;
  const auto spent = Spent(*q, z, steps, *delta, *sampling, *conversion);
  CHECK(spent.ok()) << spent.status();
  std::printf(
      "noise_multiplier %s (epsilon %.12g at order %g; the smallest to within %g relative)\n"
      "(target epsilon %g; %s)\n",
      z_text.c_str(), spent->epsilon, spent->order, options.relative_tolerance, *target,
      setting.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Epsilon of T subsampled-Gaussian steps, or the noise multiplier a target epsilon "
      "needs:\n  dp_accountant --sampling_rate=Q (--noise_multiplier=Z | --target_epsilon=E) "
      "--steps=T --delta=D [--sampling=poisson|fixed_size] [--conversion=cks|classic] "
      "[--accountant=rdp|pld [--value_discretization_interval=1e-4]]");
  if (const std::optional<std::string> mistake = CommandLineMistake(argc, argv)) {
    return UsageError(*mistake);
  }
  const auto positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    return UsageError(absl::StrCat("unexpected argument \"", positional[1], "\"; see --help"));
  }
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return Main();
}
