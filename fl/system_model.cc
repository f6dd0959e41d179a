#include "fl/system_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/seeding.h"

namespace fl {

SystemModel::SystemModel(fedkit::SystemSpec spec, uint64_t seed, int rounds)
    : spec_(std::move(spec)), seed_(seed), rounds_(rounds) {}

absl::Status SystemModel::Check(const fedkit::SystemSpec& spec) {
  ErrorList errors;
  auto fraction = [&errors](const char* name, double value, bool one_allowed) {
    if (!(value >= 0 && (one_allowed ? value <= 1 : value < 1))) {
      errors.Add(absl::StrCat("client.system.", name),
                 absl::StrCat("must be in [0, 1", one_allowed ? "]" : ")", ", got ", value));
    }
  };
  fraction("straggler_fraction", spec.straggler_fraction(), true);
  fraction("inactive_fraction", spec.inactive_fraction(), false);
  fraction("late_join_fraction", spec.late_join_fraction(), true);
  fraction("early_leave_fraction", spec.early_leave_fraction(), true);
  if (!(spec.speed_sigma() >= 0) || !std::isfinite(spec.speed_sigma())) {
    errors.Add("client.system.speed_sigma", absl::StrCat("must be >= 0, got ", spec.speed_sigma()));
  }
  if (spec.speed_sigma() > 0 && !(spec.deadline() > 0)) {
    errors.Add("client.system.deadline",
               absl::StrCat("must be > 0 with speed_sigma, got ", spec.deadline()));
  }
  return errors.ToStatus();
}

int64_t SystemModel::CompletedSteps(int64_t client, int round, int64_t planned) const {
  const auto id = static_cast<uint64_t>(client);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  // Per client, once: its availability window and its speed.
  std::mt19937_64 per_client(DeriveSeed(seed_, SeedStream::kSystem, {id}));
  if (unit(per_client) < spec_.late_join_fraction() && rounds_ >= 2) {
    const int joins = std::uniform_int_distribution<int>(2, rounds_)(per_client);
    if (round < joins) return 0;
  }
  if (unit(per_client) < spec_.early_leave_fraction() && rounds_ >= 2) {
    const int leaves = std::uniform_int_distribution<int>(1, rounds_ - 1)(per_client);
    if (round > leaves) return 0;
  }
  int64_t steps = planned;
  if (spec_.speed_sigma() > 0) {
    const double speed =
        std::lognormal_distribution<double>(0.0, spec_.speed_sigma())(per_client);
    steps = static_cast<int64_t>(
        std::floor(static_cast<double>(planned) * std::min(1.0, speed * spec_.deadline())));
  }
  // Per round.
  std::mt19937_64 per_round(
      DeriveSeed(seed_, SeedStream::kSystem, {id, static_cast<uint64_t>(round)}));
  if (unit(per_round) < spec_.inactive_fraction()) return 0;
  if (unit(per_round) < spec_.straggler_fraction() && planned >= 1) {
    steps = std::min(steps, std::uniform_int_distribution<int64_t>(1, planned)(per_round));
  }
  return steps;
}

}  // namespace fl
