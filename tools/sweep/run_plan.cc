#include "tools/sweep/run_plan.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fl/spec_loader.h"
#include "google/protobuf/util/message_differencer.h"

namespace sweep {

namespace fs = std::filesystem;

std::vector<Run> PlanRuns(const Sweep& sweep, const std::vector<const Variant*>& variants,
                          const std::vector<uint64_t>& seeds) {
  std::vector<Run> runs;
  for (const Variant* variant : variants) {
    for (uint64_t seed : seeds) {
      Run& run = runs.emplace_back();
      run.variant = variant;
      run.seed = seed;
      run.dir = (fs::path(sweep.out) / absl::StrCat(variant->name(), "_seed", seed)).string();
      run.log = run.dir + ".log";
    }
  }
  return runs;
}

DiskState StateOnDisk(const Run& run) {
  std::error_code error;
  if (fs::exists(fs::path(run.dir) / "summary.json", error)) return DiskState::kFinished;
  if (fs::exists(run.dir, error) || fs::exists(run.log, error)) return DiskState::kInterrupted;
  return DiskState::kAbsent;
}

std::string StaleReason(const std::string& dir, const fedkit::ExperimentSpec& expected) {
  const std::string path = (fs::path(dir) / "spec.textproto").string();
  absl::StatusOr<fedkit::ExperimentSpec> actual = fl::LoadSpecFile(path);
  if (!actual.ok()) {
    const std::vector<absl::string_view> lines = absl::StrSplit(actual.status().message(), '\n');
    return absl::StrCat("cannot compare specs: ", lines.front());
  }
  std::string differences;
  {
    // The report is complete only once the differencer (its printer) is gone.
    google::protobuf::util::MessageDifferencer differencer;
    const google::protobuf::Descriptor* descriptor = fedkit::ExperimentSpec::descriptor();
    differencer.IgnoreField(descriptor->FindFieldByName("output"));
    differencer.IgnoreField(descriptor->FindFieldByName("simulation"));
    differencer.set_report_ignores(false);
    differencer.ReportDifferencesToString(&differences);
    if (differencer.Compare(*actual, expected)) return "";
  }
  const std::vector<absl::string_view> lines =
      absl::StrSplit(differences, '\n', absl::SkipWhitespace());
  if (lines.empty()) return "spec.textproto differs";
  std::string reason = absl::StrCat("spec.textproto differs (run -> sweep): ", lines.front());
  if (lines.size() > 1) absl::StrAppend(&reason, " (and ", lines.size() - 1, " more)");
  return reason;
}

}  // namespace sweep
