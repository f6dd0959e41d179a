#ifndef TOOLS_SWEEP_REPORT_H_
#define TOOLS_SWEEP_REPORT_H_

// A sweep's results over its runs: statistics across seeds, paired differences
// to the baseline, what the reports show of them (computed once: ComputeTables,
// ComputeCurves), and the contents of runs.csv, table.md and the data curves.py
// draws curves.png from. html_report.h makes report.html of the same.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fl/report/result_files.h"
#include "tools/sweep/metrics.h"
#include "tools/sweep/sweep.pb.h"

namespace sweep {

// Mean and sample standard deviation (n - 1 in the denominator) over seeds; sd is
// NaN below 2 values, both are NaN for none.
struct SeedStats {
  int n = 0;
  double mean = 0.0;
  double sd = 0.0;
};
SeedStats Summarize(const std::vector<double>& values);

// variant - baseline, seed by seed, over the seeds both have: their mean and range.
struct PairedDifference {
  int n = 0;
  double mean = 0.0;
  double min = 0.0;
  double max = 0.0;
};
PairedDifference PairedDifferences(const std::map<uint64_t, double>& variant,
                                   const std::map<uint64_t, double>& baseline);

// Per round, over several runs' series: the rounds every one of them has (so the
// band never mixes fewer runs in), and the mean, min and max there.
struct Band {
  std::vector<int> rounds;
  std::vector<double> mean;
  std::vector<double> min;
  std::vector<double> max;
};
Band CombineSeries(const std::vector<const fl::report::Series*>& series);

enum class RunStatus {
  kFinished,    // summary.json is there
  kFailed,      // this invocation ran it and it exited non-zero
  kIncomplete,  // a folder or log, but no summary.json (interrupted, or failed before)
  kNotRun,
};

// "finished", "failed", "incomplete (no summary.json)", "not run".
const char* StatusText(RunStatus status);

struct RunRecord {
  std::string variant;  // the variant's name
  uint64_t seed = 0;
  RunStatus status = RunStatus::kNotRun;
  std::string log;    // the log's path relative to the results folder
  std::string stale;  // why its spec.textproto differs from the sweep's; empty: it does not
  // Its report.html relative to the results folder; empty when it has none.
  std::string report;
  RunData data;  // finished runs only
};

// What table.md says about how it was made.
struct TableContext {
  std::string command;    // the command that reproduces the sweep
  std::string base_spec;  // the base spec's path as shown
  std::vector<uint64_t> seeds;
};

// A table of text cells, as table.md and report.html show it.
struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  // The leading columns that hold text (left-aligned); the others hold numbers.
  size_t text_columns = 1;
};

// A run the reports list under the tables, and what about it.
struct RunNote {
  std::string variant;
  uint64_t seed = 0;
  std::string text;
  std::string log;  // a log to see, relative to the results folder; empty: none
};

// Why stale runs are listed, under their heading.
inline constexpr char kStaleRunsNote[] =
    "Their spec.textproto differs from what the sweep asks now (output and simulation aside); "
    "their numbers are in the tables above. --rerun_stale runs them again.";

// What table.md and report.html say about the runs, computed once: the
// sentences (plain text) around the tables, the tables' cells, the runs listed.
struct SweepTables {
  // "Seeds: 1, 2, 3. 2 variants x 3 seeds: 5 of 6 runs finished, 1 failed."
  std::string overview;
  std::string results_note;
  TextTable results;
  // Empty when no variant is compared to another (then no differences table).
  std::string differences_heading;
  std::string differences_note;
  TextTable differences;
  std::vector<RunNote> stale;
  std::vector<RunNote> missing;   // failed, incomplete or not run
  std::vector<RunNote> problems;  // finished, but some file was unreadable
};

// What the reports draw: per variant the curve column's band over its finished
// runs (mean, min and max per round) against the curve's x column, and per
// diagnostic each variant's mean against the round.
struct VariantCurve {
  std::string label;
  int variant = 0;  // the variant's index in the sweep (its colour in every chart)
  int runs = 0;
  Band band;
  // Where each of band.rounds is drawn: the round, or the mean over the runs of
  // the sweep's curve_x_column there (those rounds only where every run has it).
  std::vector<double> x;
};
struct DiagnosticCurves {
  std::string name;
  std::vector<VariantCurve> variants;  // those whose runs have the diagnostic
};
struct SweepCurves {
  std::string x_column;  // CurveXColumn: what variants' x values are
  std::vector<VariantCurve> variants;
  std::vector<DiagnosticCurves> diagnostics;  // in the sweep's order
};

// `spec` has its defaults filled (labels, metrics, references' metrics,
// reference_label); `runs` are the sweep's runs in table order (variants, then
// seeds), finished or not. The tables give a metric that variants have
// references for a column of them right after its own; runs.csv is per run and
// has none.
SweepTables ComputeTables(const fedkit::sweep::SweepSpec& spec, const TableContext& context,
                          const std::vector<RunRecord>& runs);
SweepCurves ComputeCurves(const fedkit::sweep::SweepSpec& spec, const std::vector<RunRecord>& runs);
// The sweep's curve_x_column, "round" when empty.
std::string CurveXColumn(const fedkit::sweep::SweepSpec& spec);
std::string RunsCsv(const fedkit::sweep::SweepSpec& spec, const std::vector<RunRecord>& runs);
std::string TableMarkdown(const fedkit::sweep::SweepSpec& spec, const TableContext& context,
                          const std::vector<RunRecord>& runs);
// JSON for curves.py: ComputeCurves' bands (the diagnostics' means only).
std::string CurvesJson(const fedkit::sweep::SweepSpec& spec, const std::vector<RunRecord>& runs);

}  // namespace sweep

#endif  // TOOLS_SWEEP_REPORT_H_
