// Partitions a spec's training set exactly as a run would (the spec's dataset,
// partitioner, seed and any proxy set carved out of TRAIN) and reports what each
// client holds: prints client sizes (min / median / max) and a per-client table,
// and writes counts.csv (clients x classes) and summary.txt to --out. The picture
// comes from //tools:partition_report, which runs this first.
//
//   bazel run //tools:partition_counts -- --spec=experiments/quickstart.textproto --out=DIR
//
// Relative paths are relative to the folder bazel was run from. Exit codes: 0 done,
// 1 loading or partitioning failed, 2 the spec or the command line is wrong.

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fl/data_splits.h"
#include "fl/dataset.h"
#include "fl/errors.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "fl/report/class_counts.h"
#include "fl/seeding.h"
#include "fl/spec_loader.h"
#include "fl/status_macros.h"
#include "tools/partition_stats.h"

ABSL_FLAG(std::string, spec, "", "Path of the ExperimentSpec text proto.");
ABSL_FLAG(std::string, set, "",
          "Text-format fragment merged into the spec, e.g. 'partition { num_clients: 20 }'.");
ABSL_FLAG(std::string, out, "", "Folder for counts.csv and summary.txt (created).");

namespace {

// `path` made absolute against the folder `bazel run` was started in.
std::string FromUserDir(const std::string& path) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  const char* user_dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return user_dir == nullptr ? path : (std::filesystem::path(user_dir) / path).string();
}

std::vector<int64_t> ToVector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kCPU, at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

struct Plugins {
  std::unique_ptr<fl::Dataset> dataset;
  std::unique_ptr<fl::Partitioner> partitioner;
};

// Creates the spec's dataset and partitioner, reporting every problem with its path.
absl::StatusOr<Plugins> CreatePlugins(const fedkit::ExperimentSpec& spec) {
  fl::ErrorList errors;
  Plugins plugins;
  auto dataset =
      fl::Registry<fl::Dataset>::Global().Create(spec.dataset().name(), spec.dataset().options());
  if (dataset.ok()) {
    plugins.dataset = *std::move(dataset);
  } else {
    errors.AddStatus(absl::StrCat("dataset (", spec.dataset().name(), "): "), dataset.status());
  }
  auto partitioner = fl::Registry<fl::Partitioner>::Global().Create(spec.partition().name(),
                                                                    spec.partition().options());
  if (partitioner.ok()) {
    plugins.partitioner = *std::move(partitioner);
  } else {
    errors.AddStatus(absl::StrCat("partition (", spec.partition().name(), "): "),
                     partitioner.status());
  }
  if (spec.partition().num_clients() < 1) {
    errors.Add("partition.num_clients",
               absl::StrCat("must be >= 1, got ", spec.partition().num_clients()));
  }
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return plugins;
}

// The partition a run of `spec` would use; `labels` gets the training labels it indexes.
absl::StatusOr<std::vector<std::vector<int64_t>>> PartitionAsARun(
    const fedkit::ExperimentSpec& spec, const Plugins& plugins, std::vector<int64_t>& labels) {
  const int64_t num_classes = plugins.dataset->info().num_classes;
  FL_RETURN_IF_ERROR(plugins.dataset->CheckAvailable());
  FL_ASSIGN_OR_RETURN(fl::DatasetSplits data, plugins.dataset->Load());
  // As RunExperiment: a proxy set taken from TRAIN is not the clients'.
  FL_RETURN_IF_ERROR(fl::TakeProxy(spec.server().proxy(), num_classes,
                                     fl::DeriveSeed(spec.seed(), fl::SeedStream::kProxySplit), data)
                         .status());
  labels = ToVector(data.train.y);
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("train label ", labels[i], " at index ", i,
                                                     " is outside [0, ", num_classes, ")"));
    }
  }
  const std::vector<int64_t> owners =
      data.train_owners.defined() ? ToVector(data.train_owners) : std::vector<int64_t>();
  std::mt19937_64 rng(fl::DeriveSeed(spec.seed(), fl::SeedStream::kPartition));
  auto shares = plugins.partitioner->Partition({labels, num_classes, owners},
                                               spec.partition().num_clients(), rng);
  if (!shares.ok()) {
    return absl::Status(shares.status().code(), absl::StrCat("partition (", spec.partition().name(),
                                                             "): ", shares.status().message()));
  }
  return shares;
}

int Fail(int code, const std::string& headline, const absl::Status& status) {
  std::fprintf(stderr, "%s\n", headline.c_str());
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    std::fprintf(stderr, "  %s\n", std::string(line).c_str());
  }
  return code;
}

int Main() {
  const std::string spec_path = FromUserDir(absl::GetFlag(FLAGS_spec));
  const std::string out = FromUserDir(absl::GetFlag(FLAGS_out));
  if (spec_path.empty() || out.empty()) {
    std::fprintf(stderr, "--spec and --out are required; see --help\n");
    return 2;
  }
  absl::StatusOr<fedkit::ExperimentSpec> spec = fl::LoadSpecFile(spec_path);
  if (!spec.ok()) return Fail(2, absl::StrCat("invalid spec ", spec_path, ":"), spec.status());
  if (const std::string fragment = absl::GetFlag(FLAGS_set); !fragment.empty()) {
    if (absl::Status status = fl::ApplyOverride(fragment, *spec); !status.ok()) {
      return Fail(2, "cannot apply --set:", status);
    }
  }
  absl::StatusOr<Plugins> plugins = CreatePlugins(*spec);
  if (!plugins.ok())
    return Fail(2, absl::StrCat("invalid spec ", spec_path, ":"), plugins.status());

  std::vector<int64_t> labels;
  absl::StatusOr<std::vector<std::vector<int64_t>>> shares;
  try {
    shares = PartitionAsARun(*spec, *plugins, labels);
  } catch (const c10::Error& e) {
    shares = absl::InternalError(e.what_without_backtrace());
  }
  if (!shares.ok()) return Fail(1, "partitioning failed:", shares.status());

  const auto counts =
      fl::report::CountByClass(*shares, labels, plugins->dataset->info().num_classes);
  const std::string summary = absl::StrCat(
      "dataset ", spec->dataset().name(), ": ", labels.size(), " training examples; partition ",
      spec->partition().name(), ", seed ", spec->seed(), "\n", tools::SummaryText(counts));
  std::filesystem::create_directories(out);
  std::ofstream(out + "/counts.csv") << fl::report::CountsCsv(counts);
  std::ofstream(out + "/summary.txt") << summary;
  std::printf("%s\nwrote %s/counts.csv and %s/summary.txt\n", summary.c_str(), out.c_str(),
              out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Reports how a spec's partitioner splits its training set.");
  absl::ParseCommandLine(argc, argv);
  return Main();
}
