// Runs a sweep: a base experiment spec, named variants of it, several seeds, a
// few runs at a time; then a table of the results (mean ± sd over the seeds and
// each variant's paired difference to a baseline) and their curves.
//
//   bazel run //tools/sweep -- --sweep=FILE [--out=DIR] [--jobs=N]
//       [--only=VARIANT,...] [--seeds=1,2,...] [--report_only] [--rerun_stale]
//       [--validate_only]
//
// FILE is a fedkit.sweep.SweepSpec in text format (tools/sweep/sweep.proto says
// what each field means; tools/sweep/testdata/example.sweep.textproto is one).
// Relative paths on the command line are relative to the folder bazel was run
// from; relative paths in the file, to the file's folder.
//
// Before anything runs, the whole sweep is checked: the file's fields, the base
// spec, and every variant's spec as the runner will build it (every plugin and
// its options). All problems are printed at once, each naming its field or its
// variant, and the exit code is 2.
//
// Run (variant v, seed s) is run_experiment with --spec=<base_spec>
// --output_dir=<out>/<v>_seed<s> --set="seed: <s> <set> <v's set>" (plus
// simulation { workers: 1 threads_per_worker: T } when the sweep sets threads per
// job), its output in
// <out>/<v>_seed<s>.log. A private copy of the runner is made first, so
// rebuilding the tree during a long sweep does not change what runs.
//
// Resuming: a run whose folder holds summary.json is finished and not run again,
// so an interrupted sweep continues where it stopped, and more variants or seeds
// can be added to the file later. A finished run whose spec.textproto differs
// from what the sweep now asks (output and simulation aside) is "stale": a
// warning, a mark in table.md, and --rerun_stale runs it again. A run folder
// without summary.json (a run that was stopped or failed) continues from its
// checkpoint.fkc when it has one of this sweep's spec (run_experiment --resume),
// else is deleted and run again from the start. So one sweep at a time per results
// folder: while one runs it holds <out>/.sweep.lock, and a second exits 1 at once.
//
//   --out=DIR       the results folder, instead of the file's `out`
//   --jobs=N        runs at a time, instead of the file's `jobs` (default 2)
//   --only=A,B      run only these variants (the reports still cover them all)
//   --seeds=1,2     run only these seeds; seeds not in the file are added to the
//                   reports as well
//   --report_only   run nothing; rewrite the reports from what <out> holds
//   --validate_only check the sweep and every run's spec, run nothing, write nothing
//   --rerun_stale   run stale runs again
//
// Progress is one line, "[done 12/36, 2 running, 1 failed] ETA 14m", rewritten in
// place on a terminal. A run that fails prints "FAILED <variant> seed <s>: see
// <log>" and the others go on. Ctrl-C (or SIGTERM) starts nothing more and
// passes the signal on to the running runs, which checkpoint and stop; the
// reports are then written from what finished.
//
// Results in <out>: runs.csv (one row per finished run: each metric, wall
// seconds, peak RSS, whether stale), table.md (how to reproduce, then per variant
// each metric's mean ± sd, and the sweep file's reference for it if any; the
// paired differences to the baseline; the stale, failed and missing runs),
// curves.png (drawn by curves.py with /usr/bin/python3 and matplotlib; skipped
// with a warning without them, and left out when every run has a single
// evaluated round, as one-shot runs do) and report.html (table.md and the curves
// on one self-contained page, with a link to each run's own report.html; a
// finished run without one, from before runs wrote it, gets it now, unless its
// spec says output { report: false }). Wall
// seconds are the run's process as the sweep timed it (it appends them to the
// log's last line), or summary.json's for runs it did not start; peak RSS is
// summary.json's, or the process's ru_maxrss.
//
// Exit codes: 0 every run finished, 1 a run failed (the reports are still
// written), 2 the sweep file or the command line is wrong (nothing ran), 3
// stopped by SIGINT or SIGTERM.

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fl/atomic_file.h"
#include "fl/report/run_report.h"
#include "glog/logging.h"
#include "tools/sweep/html_report.h"
#include "tools/sweep/launcher.h"
#include "tools/sweep/metrics.h"
#include "tools/sweep/progress.h"
#include "tools/sweep/report.h"
#include "tools/sweep/run_plan.h"
#include "tools/sweep/sweep_spec.h"

ABSL_FLAG(std::string, sweep, "", "Path of the sweep file (a fedkit.sweep.SweepSpec text proto).");
ABSL_FLAG(std::string, out, "", "Results folder; overrides the sweep's `out`.");
ABSL_FLAG(std::optional<int>, jobs, std::nullopt, "Runs at a time; overrides the sweep's `jobs`.");
ABSL_FLAG(std::vector<std::string>, only, {}, "Run only these variants (comma-separated names).");
ABSL_FLAG(std::vector<std::string>, seeds, {},
          "Run only these seeds (comma-separated); ones the sweep lacks are reported too.");
ABSL_FLAG(bool, report_only, false, "Run nothing; rewrite the reports from the results folder.");
ABSL_FLAG(bool, validate_only, false,
          "Check the sweep file and every variant's spec, then exit (0: valid, 2: not).");
ABSL_FLAG(bool, rerun_stale, false,
          "Run again the finished runs whose spec.textproto differs from the sweep's.");

namespace sweep {
namespace {

namespace fs = std::filesystem;

constexpr char kWorkspace[] = "fedkit";
constexpr char kPython[] = "/usr/bin/python3";

// The folder the user ran bazel from (where relative command-line paths start).
fs::path UserDir() {
  const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
  return dir != nullptr ? fs::path(dir) : fs::current_path();
}

std::string FromUserDir(const std::string& path) {
  if (path.empty()) return path;
  return (UserDir() / path).lexically_normal().string();
}

// `path` relative to `base` when inside it, else as it is.
std::string RelativeTo(const std::string& path, const fs::path& base) {
  const fs::path relative = fs::path(path).lexically_relative(base);
  if (relative.empty() || *relative.begin() == "..") return path;
  return relative.string();
}

// A path for the record in table.md: relative to the workspace, as a command run
// from its root would name it.
std::string ForTheRecord(const std::string& path) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");
  return RelativeTo(path, workspace != nullptr ? fs::path(workspace) : UserDir());
}

int Fail(int code, const std::string& headline, const absl::Status& status) {
  std::fprintf(stderr, "%s\n", headline.c_str());
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    std::fprintf(stderr, "  %s\n", std::string(line).c_str());
  }
  return code;
}

// `path` (relative to the workspace root) among this binary's runfiles: beside
// argv[0] (bazel-bin), in $RUNFILES_DIR or $TEST_SRCDIR (tests), or in the
// current folder (bazel run starts binaries in their runfiles root).
std::optional<std::string> FindRunfile(const std::string& argv0, const std::string& path) {
  std::vector<fs::path> candidates = {fs::path(argv0 + ".runfiles") / kWorkspace / path};
  for (const char* variable : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* dir = std::getenv(variable))
      candidates.push_back(fs::path(dir) / kWorkspace / path);
  }
  candidates.push_back(fs::current_path() / path);
  for (const fs::path& candidate : candidates) {
    std::error_code error;
    if (fs::exists(candidate, error)) return fs::absolute(candidate).string();
  }
  return std::nullopt;
}

// A private folder under $TMPDIR, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/fedkit_sweep.XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    std::error_code error;
    if (!path_.empty()) fs::remove_all(path_, error);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

absl::StatusOr<std::vector<uint64_t>> ParseSeeds(const std::vector<std::string>& texts) {
  std::vector<uint64_t> seeds;
  for (const std::string& text : texts) {
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(text, &seed)) {
      return absl::InvalidArgumentError(absl::StrCat("--seeds: \"", text, "\" is not a seed"));
    }
    if (std::find(seeds.begin(), seeds.end(), seed) == seeds.end()) seeds.push_back(seed);
  }
  return seeds;
}

std::string RunName(const Run& run) {
  return absl::StrCat(run.variant->name(), " seed ", run.seed);
}

// The last non-empty line of a file, for a warning about what went wrong.
std::string LastLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::string last;
  while (std::getline(in, line)) {
    if (!line.empty()) last = line;
  }
  return last;
}

// Draws curves.png from `json` with curves.py; only warns when it cannot.
bool DrawCurves(const std::string& argv0, const std::string& json, const std::string& out,
                const std::string& temp) {
  const std::string png = (fs::path(out) / "curves.png").string();
  std::optional<std::string> script = FindRunfile(argv0, "tools/sweep/curves.py");
  if (access(kPython, X_OK) != 0 || !script.has_value()) {
    std::fprintf(stderr, "warning: no curves.png: %s\n",
                 script.has_value() ? "/usr/bin/python3 is missing" : "curves.py is missing");
    return false;
  }
  const std::string data = (fs::path(temp) / "curves.json").string();
  if (absl::Status status = fl::WriteFileAtomically(data, json); !status.ok()) {
    std::fprintf(stderr, "warning: no curves.png: %s\n", std::string(status.message()).c_str());
    return false;
  }
  Job job;
  job.argv = {kPython, *script, data, png};
  job.log = (fs::path(temp) / "curves.log").string();
  bool stopped = false;
  const JobResult result =
      RunJobs({job}, 1, {[](size_t) {}, [](size_t, const JobResult&) {}}, &stopped)[0];
  if (!result.ok()) {
    std::fprintf(stderr, "warning: no curves.png: %s\n", LastLine(job.log).c_str());
  }
  return result.ok();
}

// Why the finished `run` is stale; empty when it is not.
std::string Staleness(const Sweep& sweep, const Run& run) {
  absl::StatusOr<fedkit::ExperimentSpec> expected = RunSpec(sweep, *run.variant, run.seed);
  return expected.ok() ? StaleReason(run.dir, *expected) : std::string(expected.status().message());
}

struct Selection {
  std::vector<const Run*> to_run;
  int skipped = 0;  // finished already
};

// Which of `runs` this invocation starts: those --only and --seeds leave in that
// are not finished, or are stale with --rerun_stale. Prints what it leaves out.
Selection RunsToStart(const Sweep& sweep, const std::vector<Run>& runs,
                      const std::set<std::string>& only, const std::set<uint64_t>& seeds) {
  Selection selection;
  for (const Run& run : runs) {
    if ((!only.empty() && !only.count(run.variant->name())) || !seeds.count(run.seed)) continue;
    if (StateOnDisk(run) == DiskState::kFinished) {
      const std::string stale = Staleness(sweep, run);
      const bool rerun = !stale.empty() && absl::GetFlag(FLAGS_rerun_stale);
      if (!stale.empty()) {
        std::printf("stale: %s: %s (%s)\n", RunName(run).c_str(), stale.c_str(),
                    rerun ? "running it again" : "kept; --rerun_stale runs it again");
      }
      if (!rerun) {
        ++selection.skipped;
        continue;
      }
    }
    selection.to_run.push_back(&run);
  }
  if (selection.skipped > 0) std::printf("skipped %d finished runs\n", selection.skipped);
  return selection;
}

struct LaunchOutcome {
  std::set<const Run*> failed;
  bool stopped = false;
};

// Runs `to_run` with a private copy of the runner, `sweep.jobs` at a time, with
// the progress line; `done` runs of the sweep finished before.
absl::StatusOr<LaunchOutcome> Launch(const Sweep& sweep, const std::vector<const Run*>& to_run,
                                     int done, const std::string& argv0, const TempDir& temp) {
  std::optional<std::string> runner = FindRunfile(argv0, "tools/run_experiment");
  if (!runner.has_value()) {
    return absl::NotFoundError("tools/run_experiment is not in this binary's runfiles");
  }
  if (temp.path().empty()) return absl::InternalError("cannot create a temporary folder");
  const std::string copy = (fs::path(temp.path()) / "run_experiment").string();
  std::error_code error;
  fs::copy_file(*runner, copy, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot copy ", *runner, ": ", error.message()));
  fs::create_directories(sweep.out, error);
  if (error)
    return absl::InternalError(absl::StrCat("cannot create ", sweep.out, ": ", error.message()));
  // A second sweep in the same folder would delete the first's unfinished runs
  // (below) while they run. The kernel drops the lock when this process ends.
  const std::string lock_path = (fs::path(sweep.out) / ".sweep.lock").string();
  const int lock = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock < 0) return absl::InternalError(absl::StrCat("cannot open ", lock_path));
  if (flock(lock, LOCK_EX | LOCK_NB) != 0) {
    close(lock);
    return absl::FailedPreconditionError(
        absl::StrCat("another sweep is running in ", RelativeTo(sweep.out, UserDir()),
                     " (it holds ", lock_path,
                     "); wait for it to end, or give this one another --out"));
  }
  struct LockRelease {
    int fd;
    ~LockRelease() { close(fd); }
  } release{lock};

  std::vector<Job> jobs;
  for (const Run* run : to_run) {
    Job& job = jobs.emplace_back();
    job.log = run->log;
    // An interrupted run of this sweep's spec continues from its checkpoint; a
    // stale one, or one stopped before its first checkpoint, starts over.
    if (StateOnDisk(*run) == DiskState::kInterrupted &&
        fs::exists(fs::path(run->dir) / "checkpoint.fkc") && Staleness(sweep, *run).empty()) {
      job.argv = {copy, "--resume=" + run->dir};
      job.append_log = true;
      continue;
    }
    fs::remove_all(run->dir, error);
    // The threads per job reach the runner through simulation { threads_per_worker }
    // in the override, which sizes its BLAS and LibTorch pools.
    job.argv = {copy, "--spec=" + sweep.base_spec_path, "--output_dir=" + run->dir,
                "--set=" + RunOverride(sweep, *run->variant, run->seed)};
  }
  std::printf("running %zu runs, %d at a time, in %s\n", jobs.size(), sweep.jobs,
              RelativeTo(sweep.out, UserDir()).c_str());

  LaunchOutcome outcome;
  Progress progress(static_cast<int>(to_run.size()) + done, done, sweep.jobs, stdout);
  JobCallbacks callbacks;
  callbacks.started = [&](size_t) { progress.Started(); };
  callbacks.finished = [&](size_t i, const JobResult& result) {
    const Run& run = *to_run[i];
    // For the reports (wall time, memory) and for whoever reads the log.
    std::ofstream(run.log, std::ios::app)
        << LogTrailer(result.how, result.wall_seconds, result.max_rss_mb);
    // A run that the SIGINT or SIGTERM passed on stopped (exit 3) has not failed.
    if (outcome.stopped && result.exit_code == 3) {
      progress.Message(absl::StrCat("stopped ", RunName(run), " (it starts over next time)"));
      progress.Stopped();
      return;
    }
    if (!result.ok()) {
      outcome.failed.insert(&run);
      progress.Message(absl::StrCat("FAILED ", RunName(run), ": see ",
                                    RelativeTo(run.log, UserDir()), " (", result.how, ")"));
    }
    progress.Finished(result.ok(), result.wall_seconds);
  };
  RunJobs(jobs, sweep.jobs, callbacks, &outcome.stopped);
  progress.Close();
  return outcome;
}

// Whether the run's spec turns its report.html off (output.report: false).
bool ReportOff(const Sweep& sweep, const Run& run) {
  absl::StatusOr<fedkit::ExperimentSpec> spec = RunSpec(sweep, *run.variant, run.seed);
  return spec.ok() && spec->output().has_report() && !spec->output().report();
}

// The finished run's report.html relative to the results folder, written first
// when the run has none (it finished before runs wrote their own) unless its spec
// turns it off; empty when there is none.
std::string RunReport(const Sweep& sweep, const Run& run) {
  const std::string page = (fs::path(run.dir) / "report.html").string();
  if (!fs::exists(page)) {
    if (ReportOff(sweep, run)) return "";
    if (absl::Status status = fl::report::WriteRunReport(run.dir); !status.ok()) {
      std::fprintf(stderr, "warning: no report.html for %s: %s\n", RunName(run).c_str(),
                   std::string(status.message()).c_str());
      return "";
    }
  }
  return RelativeTo(page, sweep.out);
}

// What the results folder holds of every run the reports cover.
std::vector<RunRecord> Records(const Sweep& sweep, const std::vector<Run>& runs,
                               const std::set<const Run*>& failed) {
  std::vector<RunRecord> records;
  for (const Run& run : runs) {
    RunRecord& record = records.emplace_back();
    record.variant = run.variant->name();
    record.seed = run.seed;
    record.log = RelativeTo(run.log, sweep.out);
    switch (StateOnDisk(run)) {
      case DiskState::kFinished:
        record.status = RunStatus::kFinished;
        record.data = LoadRunData(run.dir, run.log, sweep.spec);
        record.stale = Staleness(sweep, run);
        record.report = RunReport(sweep, run);
        break;
      case DiskState::kInterrupted:
        record.status = failed.count(&run) ? RunStatus::kFailed : RunStatus::kIncomplete;
        break;
      case DiskState::kAbsent:
        record.status = failed.count(&run) ? RunStatus::kFailed : RunStatus::kNotRun;
        break;
    }
  }
  return records;
}

absl::Status WriteReports(const Sweep& sweep, const TableContext& context,
                          const std::vector<RunRecord>& records, const std::string& argv0,
                          const TempDir& temp) {
  std::error_code error;
  fs::create_directories(sweep.out, error);
  for (const auto& [name, contents] :
       {std::pair<std::string, std::string>{"runs.csv", RunsCsv(sweep.spec, records)},
        {"table.md", TableMarkdown(sweep.spec, context, records)},
        {"report.html", SweepReportHtml(sweep.spec, context, records)}}) {
    absl::Status status = fl::WriteFileAtomically((fs::path(sweep.out) / name).string(), contents);
    if (!status.ok()) return status;
  }
  // An old picture beside a new table would contradict it.
  fs::remove(fs::path(sweep.out) / "curves.png", error);
  // Runs of one evaluated round (one-shot runs) have no curve to draw.
  const bool any_curve = std::any_of(records.begin(), records.end(), [](const RunRecord& r) {
    return r.status == RunStatus::kFinished && r.data.curve.size() > 1;
  });
  const bool drawn = any_curve && !temp.path().empty() &&
                     DrawCurves(argv0, CurvesJson(sweep.spec, records), sweep.out, temp.path());
  std::printf("reports in %s: table.md, runs.csv, report.html%s\n",
              RelativeTo(sweep.out, UserDir()).c_str(), drawn ? ", curves.png" : "");
  return absl::OkStatus();
}

int Main(const std::string& argv0) {
  if (absl::GetFlag(FLAGS_sweep).empty()) {
    std::fprintf(stderr, "--sweep is required; see --helpfull\n");
    return 2;
  }
  const std::string path = FromUserDir(absl::GetFlag(FLAGS_sweep));
  SweepFlags flags;
  flags.out = FromUserDir(absl::GetFlag(FLAGS_out));
  flags.jobs = absl::GetFlag(FLAGS_jobs);
  absl::StatusOr<Sweep> loaded = LoadSweep(path, flags);
  if (!loaded.ok()) return Fail(2, absl::StrCat("invalid sweep ", path, ":"), loaded.status());
  const Sweep& sweep = *loaded;
  if (absl::GetFlag(FLAGS_validate_only)) {
    std::printf("sweep %s is valid: %d variants x %d seeds\n", path.c_str(),
                sweep.spec.variants_size(), sweep.spec.seeds_size());
    return 0;
  }

  std::vector<const Variant*> variants;
  for (const Variant& variant : sweep.spec.variants()) variants.push_back(&variant);
  std::set<std::string> only;
  for (const std::string& name : absl::GetFlag(FLAGS_only)) {
    if (std::none_of(variants.begin(), variants.end(),
                     [&](const Variant* v) { return v->name() == name; })) {
      std::fprintf(stderr, "--only: \"%s\" is not a variant of %s\n", name.c_str(), path.c_str());
      return 2;
    }
    only.insert(name);
  }
  absl::StatusOr<std::vector<uint64_t>> flag_seeds = ParseSeeds(absl::GetFlag(FLAGS_seeds));
  if (!flag_seeds.ok()) return Fail(2, "invalid command line:", flag_seeds.status());
  // The reports cover the file's seeds and any --seeds adds.
  std::vector<uint64_t> seeds(sweep.spec.seeds().begin(), sweep.spec.seeds().end());
  const size_t file_seeds = seeds.size();
  for (uint64_t seed : *flag_seeds) {
    if (std::find(seeds.begin(), seeds.end(), seed) == seeds.end()) seeds.push_back(seed);
  }
  const std::vector<Run> runs = PlanRuns(sweep, variants, seeds);
  const Selection selection =
      RunsToStart(sweep, runs, only,
                  flag_seeds->empty() ? std::set<uint64_t>(seeds.begin(), seeds.end())
                                      : std::set<uint64_t>(flag_seeds->begin(), flag_seeds->end()));

  TempDir temp;
  LaunchOutcome outcome;
  if (!absl::GetFlag(FLAGS_report_only) && !selection.to_run.empty()) {
    absl::StatusOr<LaunchOutcome> launched =
        Launch(sweep, selection.to_run, selection.skipped, argv0, temp);
    if (!launched.ok()) return Fail(1, "cannot start the runs:", launched.status());
    outcome = *std::move(launched);
  }

  TableContext context;
  context.command = absl::StrCat("bazel run //tools/sweep -- --sweep=", ForTheRecord(path));
  if (!flags.out.empty()) absl::StrAppend(&context.command, " --out=", ForTheRecord(sweep.out));
  if (seeds.size() > file_seeds) {
    absl::StrAppend(&context.command, " --seeds=", absl::StrJoin(seeds, ","));
  }
  context.base_spec = ForTheRecord(sweep.base_spec_path);
  context.seeds = seeds;
  absl::Status written =
      WriteReports(sweep, context, Records(sweep, runs, outcome.failed), argv0, temp);
  if (!written.ok()) return Fail(1, "cannot write the reports:", written);
  if (!outcome.failed.empty()) return 1;
  return outcome.stopped ? 3 : 0;
}

}  // namespace
}  // namespace sweep

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs a sweep of experiments (variants x seeds) and writes table.md, runs.csv, "
      "curves.png and report.html.\n"
      "  bazel run //tools/sweep -- --sweep=FILE [--out=DIR] [--jobs=N] "
      "[--only=A,B] [--seeds=1,2] [--report_only] [--rerun_stale]");
  absl::ParseCommandLine(argc, argv);
  // Validation builds every variant's plugins, which may log.
  FLAGS_logtostderr = true;
  google::InitGoogleLogging(argv[0]);
  return sweep::Main(argv[0]);
}
