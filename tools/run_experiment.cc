// Runs one federated experiment from a text-proto spec.
//
//   bazel run //tools:run_experiment -- --spec=experiments/quickstart.textproto
//       [--output_dir=DIR] [--set='server { rounds: 3 }'] [--validate_only]
//   bazel run //tools:run_experiment -- --resume=DIR [--spec=...] [--set=...]
//   bazel run //tools:run_experiment -- --list[=json|names]
//
// Relative paths are relative to the folder bazel was run from. Exit codes: 0 done,
// 1 the run failed, 2 the spec or the command line is wrong, 3 stopped by SIGINT
// or SIGTERM after writing a checkpoint (continue it with --resume).
//
// A distributed run (simulation.backend C10D) is one such process per rank, each
// with RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (bazel run //tools:launch
// does that for local processes); only rank 0 writes results.

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "fl/aggregator.h"
#include "fl/checkpoint.h"
#include "fl/client_hook.h"
#include "fl/dataset.h"
#include "fl/experiment.h"
#include "fl/index_files.h"
#include "fl/model.h"
#include "fl/partitioner.h"
#include "fl/plugin_schema.h"
#include "fl/registry.h"
#include "fl/spec_loader.h"
#include "fl/stop_request.h"
#include "glog/logging.h"

ABSL_FLAG(std::string, spec, "", "Path of the ExperimentSpec text proto.");
ABSL_FLAG(std::string, output_dir, "",
          "Where results go; overrides the spec's output.dir (default results/<name>).");
ABSL_FLAG(std::string, set, "",
          "Text-format fragment merged into the spec, e.g. 'server { rounds: 3 } seed: 2'.");
ABSL_FLAG(std::string, resume, "",
          "Continue the run whose output folder DIR holds checkpoint.fkc, writing to DIR. "
          "The spec is the checkpoint's; a --spec or --set given may change only "
          "server.rounds, output and simulation.");
ABSL_FLAG(std::string, list, "",
          "Print every registered plugin by kind with its options' fields (type, default, "
          "comment): --list (text), --list=json (for tools), --list=names (\"kind name\" lines).");
ABSL_FLAG(bool, validate_only, false, "Validate the spec and its plugins, then exit.");

namespace {

// --list: the registries with their option schemas, or a usage error.
int List(const std::string& format) {
  fedkit::PluginCatalog catalog;
  *catalog.add_kinds() = fl::DescribeKind<fl::Dataset>();
  *catalog.add_kinds() = fl::DescribeKind<fl::Partitioner>();
  *catalog.add_kinds() = fl::DescribeKind<fl::Model>();
  *catalog.add_kinds() = fl::DescribeKind<fl::Aggregator>();
  *catalog.add_kinds() = fl::DescribeKind<fl::ClientHook>();
  if (format == "text") {
    std::fputs(fl::FormatCatalog(catalog).c_str(), stdout);
  } else if (format == "json") {
    std::fputs(fl::CatalogJson(catalog).c_str(), stdout);
  } else if (format == "names") {
    for (const fedkit::PluginKindSchema& kind : catalog.kinds()) {
      for (const fedkit::PluginSchema& plugin : kind.plugins()) {
        std::printf("%s %s\n", kind.kind().c_str(), plugin.name().c_str());
      }
    }
  } else {
    std::fprintf(stderr, "--list=%s: expected text, json or names\n", format.c_str());
    return 2;
  }
  return 0;
}

int Fail(int code, const std::string& headline, const absl::Status& status) {
  std::fprintf(stderr, "%s\n", headline.c_str());
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    std::fprintf(stderr, "  %s\n", std::string(line).c_str());
  }
  return code;
}

int Main() {
  if (const std::string format = absl::GetFlag(FLAGS_list); !format.empty()) return List(format);
  const std::string resume_dir = fl::ResolveUserPath(absl::GetFlag(FLAGS_resume));
  std::string spec_path = fl::ResolveUserPath(absl::GetFlag(FLAGS_spec));
  std::optional<fl::Checkpoint> checkpoint;
  std::optional<fedkit::ExperimentSpec> checkpointed_spec;
  if (!resume_dir.empty()) {
    if (!absl::GetFlag(FLAGS_output_dir).empty()) {
      std::fprintf(stderr, "--output_dir cannot be combined with --resume: results go to DIR\n");
      return 2;
    }
    const std::string path = absl::StrCat(resume_dir, "/", fl::kCheckpointFile);
    absl::StatusOr<fl::Checkpoint> read = fl::ReadCheckpoint(path, at::kCPU);
    if (!read.ok()) return Fail(2, "cannot resume:", read.status());
    checkpoint = *std::move(read);
    absl::StatusOr<fedkit::ExperimentSpec> parsed = fl::ParseSpec(checkpoint->spec, path);
    if (!parsed.ok()) return Fail(2, "cannot resume: the checkpoint's spec:", parsed.status());
    checkpointed_spec = *std::move(parsed);
    if (spec_path.empty()) spec_path = path;
  }
  if (spec_path.empty()) {
    std::fprintf(stderr, "--spec is required (or --list, or --resume); see --help\n");
    return 2;
  }
  absl::StatusOr<fedkit::ExperimentSpec> spec =
      checkpointed_spec.has_value() && absl::GetFlag(FLAGS_spec).empty()
          ? *checkpointed_spec
          : fl::LoadSpecFile(spec_path);
  if (!spec.ok()) return Fail(2, absl::StrCat("invalid spec ", spec_path, ":"), spec.status());
  if (const std::string fragment = absl::GetFlag(FLAGS_set); !fragment.empty()) {
    if (absl::Status status = fl::ApplyOverride(fragment, *spec); !status.ok()) {
      return Fail(2, "cannot apply --set:", status);
    }
  }
  if (checkpointed_spec.has_value()) {
    if (absl::Status status = fl::CheckResumable(*checkpointed_spec, *spec); !status.ok()) {
      return Fail(2, absl::StrCat("cannot resume from ", resume_dir, ":"), status);
    }
  }
  absl::StatusOr<fl::Experiment> experiment = fl::BuildExperiment(*spec);
  if (!experiment.ok()) {
    return Fail(2, absl::StrCat("invalid spec ", spec_path, ":"), experiment.status());
  }
  if (absl::GetFlag(FLAGS_validate_only)) {
    std::printf("spec %s is valid\n", spec_path.c_str());
    return 0;
  }
  if (checkpoint.has_value() && !experiment->device.is_cpu()) {
    // Read again so that the state kept on the accelerator goes back there.
    absl::StatusOr<fl::Checkpoint> read = fl::ReadCheckpoint(
        absl::StrCat(resume_dir, "/", fl::kCheckpointFile), experiment->device);
    if (!read.ok()) return Fail(2, "cannot resume:", read.status());
    checkpoint = *std::move(read);
  }

  std::string output_dir = resume_dir;
  if (output_dir.empty()) output_dir = absl::GetFlag(FLAGS_output_dir);
  if (output_dir.empty()) output_dir = fl::OutputDirOf(*spec);
  output_dir = fl::ResolveUserPath(output_dir);

  fl::InstallStopHandlers();
  absl::StatusOr<fl::ExperimentResult> result;
  try {
    result = fl::RunExperiment(*experiment, output_dir,
                               checkpoint.has_value() ? &*checkpoint : nullptr);
  } catch (const c10::Error& e) {
    result = absl::InternalError(e.what_without_backtrace());
  }
  if (absl::IsCancelled(result.status())) {
    std::fprintf(stderr, "%s; checkpoint in %s/%s; continue with --resume=%s\n",
                 std::string(result.status().message()).c_str(), output_dir.c_str(),
                 fl::kCheckpointFile, output_dir.c_str());
    return 3;
  }
  if (!result.ok()) return Fail(1, "the experiment failed:", result.status());
  if (result->rank != 0) {
    std::printf("rank %d done; rank 0 writes the results\n", result->rank);
    return 0;
  }
  std::printf("results in %s (metrics.csv, summary.json, spec.textproto, model.pt)\n",
              output_dir.c_str());
  const std::string page = output_dir + "/report.html";
  if (std::filesystem::exists(page)) std::printf("report: file://%s\n", page.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Runs a federated experiment from a text-proto spec.");
  // A bare --list means the text listing; absl's string flags need a value.
  std::vector<char*> args(argv, argv + argc);
  char text_listing[] = "--list=text";
  for (char*& arg : args) {
    if (std::string(arg) == "--list" || std::string(arg) == "-list") arg = text_listing;
  }
  absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return Main();
}
