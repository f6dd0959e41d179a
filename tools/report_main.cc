// Writes report.html for existing run folders, e.g. results from before runs
// wrote it themselves, or after a run's files changed (docs/report-pages.md).
//
//   bazel run //tools:report -- --run=DIR[,DIR...]
//
// Relative paths are relative to the folder bazel was run from. Exit codes: 0
// every page written, 1 a folder's files could not be read (the others are still
// written), 2 the command line is wrong.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "fl/index_files.h"
#include "fl/report/run_report.h"

ABSL_FLAG(std::vector<std::string>, run, {},
          "Run folders (comma-separated) to write report.html into.");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Writes report.html into run folders.\n  bazel run //tools:report -- --run=DIR[,DIR...]");
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> runs = absl::GetFlag(FLAGS_run);
  if (runs.empty()) {
    std::fprintf(stderr, "--run is required; see --help\n");
    return 2;
  }
  int code = 0;
  for (const std::string& run : runs) {
    const std::string dir = fl::ResolveUserPath(run);
    if (absl::Status status = fl::report::WriteRunReport(dir); !status.ok()) {
      std::fprintf(stderr, "no report for %s: %s\n", dir.c_str(),
                   std::string(status.message()).c_str());
      code = 1;
      continue;
    }
    std::printf("wrote %s/report.html\n", dir.c_str());
  }
  return code;
}
