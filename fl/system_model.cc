#include "fl/system_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/seeding.h"

namespace fl {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

SystemModel::SystemModel(fedkit::SystemSpec spec, uint64_t seed, int rounds,
                         std::shared_ptr<const ClientTrace> trace)
    : spec_(std::move(spec)), seed_(seed), rounds_(rounds), trace_(std::move(trace)) {}

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
  auto non_negative = [&errors](const char* name, double value) {
    if (!(value >= 0) || !std::isfinite(value)) {
      errors.Add(absl::StrCat("client.system.", name), absl::StrCat("must be >= 0, got ", value));
    }
  };
  non_negative("speed_sigma", spec.speed_sigma());
  non_negative("bandwidth_sigma", spec.bandwidth_sigma());
  non_negative("deadline", spec.deadline());
  if (spec.deadline() > 0 && spec.speed_sigma() == 0 && spec.trace_path().empty()) {
    errors.Add("client.system.deadline",
               "needs speed_sigma or trace_path: with every client at speed 1 no deadline "
               "below 1 could differ from one step count for all");
  }
  auto positive = [&errors](const char* name, bool has, double value) {
    if (has && !(value > 0 && std::isfinite(value))) {
      errors.Add(absl::StrCat("client.system.", name),
                 absl::StrCat("must be > 0 and finite, got ", value));
    }
  };
  positive("step_seconds", spec.has_step_seconds(), spec.step_seconds());
  positive("download_bytes_per_second", spec.has_download_bytes_per_second(),
           spec.download_bytes_per_second());
  positive("upload_bytes_per_second", spec.has_upload_bytes_per_second(),
           spec.upload_bytes_per_second());
  return errors.ToStatus();
}

SystemModel::Profile SystemModel::ProfileOf(int64_t client) const {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::mt19937_64 rng(DeriveSeed(seed_, SeedStream::kSystem, {static_cast<uint64_t>(client)}));
  Profile profile;
  if (unit(rng) < spec_.late_join_fraction() && rounds_ >= 2) {
    profile.joins = std::uniform_int_distribution<int>(2, rounds_)(rng);
  }
  if (unit(rng) < spec_.early_leave_fraction() && rounds_ >= 2) {
    profile.leaves = std::uniform_int_distribution<int>(1, rounds_ - 1)(rng);
  }
  if (spec_.speed_sigma() > 0) {
    profile.speed = std::lognormal_distribution<double>(0.0, spec_.speed_sigma())(rng);
  }
  if (trace_ != nullptr) profile.speed = trace_->ForClient(client).speed.value_or(profile.speed);
  return profile;
}

int64_t SystemModel::CompletedSteps(int64_t client, int round, int64_t planned) const {
  const Profile profile = ProfileOf(client);
  if (round < profile.joins) return 0;
  if (profile.leaves > 0 && round > profile.leaves) return 0;
  int64_t steps = planned;
  if (spec_.deadline() > 0) {
    steps = static_cast<int64_t>(std::floor(static_cast<double>(planned) *
                                            std::min(1.0, profile.speed * spec_.deadline())));
  }
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::mt19937_64 per_round(DeriveSeed(seed_, SeedStream::kSystem,
                                       {static_cast<uint64_t>(client), static_cast<uint64_t>(round)}));
  if (unit(per_round) < spec_.inactive_fraction()) return 0;
  if (unit(per_round) < spec_.straggler_fraction() && planned >= 1) {
    steps = std::min(steps, std::uniform_int_distribution<int64_t>(1, planned)(per_round));
  }
  return steps;
}

double SystemModel::Speed(int64_t client) const { return ProfileOf(client).speed; }

double SystemModel::BandwidthFactor(int64_t client) const {
  if (spec_.bandwidth_sigma() == 0) return 1.0;
  std::mt19937_64 rng(DeriveSeed(seed_, SeedStream::kBandwidth, {static_cast<uint64_t>(client)}));
  return std::lognormal_distribution<double>(0.0, spec_.bandwidth_sigma())(rng);
}

double SystemModel::DownloadBandwidth(int64_t client) const {
  if (trace_ != nullptr && trace_->ForClient(client).download_bytes_per_second.has_value()) {
    return *trace_->ForClient(client).download_bytes_per_second;
  }
  if (!spec_.has_download_bytes_per_second()) return kInfinity;
  return spec_.download_bytes_per_second() * BandwidthFactor(client);
}

double SystemModel::UploadBandwidth(int64_t client) const {
  if (trace_ != nullptr && trace_->ForClient(client).upload_bytes_per_second.has_value()) {
    return *trace_->ForClient(client).upload_bytes_per_second;
  }
  if (!spec_.has_upload_bytes_per_second()) return kInfinity;
  return spec_.upload_bytes_per_second() * BandwidthFactor(client);
}

double SystemModel::TaskSeconds(int64_t client, int round, int64_t planned, int64_t bytes_down,
                                int64_t bytes_up) const {
  const double step_seconds = spec_.has_step_seconds() ? spec_.step_seconds() : 1.0;
  const double steps = static_cast<double>(CompletedSteps(client, round, planned));
  return static_cast<double>(bytes_down) / DownloadBandwidth(client) +
         steps * step_seconds / Speed(client) +
         static_cast<double>(bytes_up) / UploadBandwidth(client);
}

OnlineWindow SystemModel::NextWindow(int64_t client, double at) const {
  return trace_ != nullptr ? trace_->NextWindow(client, at) : OnlineWindow{};
}

}  // namespace fl
