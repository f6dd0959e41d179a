#ifndef TOOLS_SWEEP_REPORT_H_
#define TOOLS_SWEEP_REPORT_H_

// A sweep's results over its runs: statistics across seeds, paired differences
// to the baseline, and the three report files' contents (runs.csv, table.md, and
// the data curves.py draws curves.png from).

#include <cstdint>
#include <map>
#include <string>
#include <vector>

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
Band CombineSeries(const std::vector<const Series*>& series);

enum class RunStatus {
  kFinished,    // summary.json is there
  kFailed,      // this invocation ran it and it exited non-zero
  kIncomplete,  // a folder or log, but no summary.json (interrupted, or failed before)
  kNotRun,
};

struct RunRecord {
  std::string variant;  // the variant's name
  uint64_t seed = 0;
  RunStatus status = RunStatus::kNotRun;
  std::string log;    // the log's path relative to the results folder
  std::string stale;  // why its spec.textproto differs from the sweep's; empty: it does not
  RunData data;       // finished runs only
};

// What table.md says about how it was made.
struct TableContext {
  std::string command;    // the command that reproduces the sweep
  std::string base_spec;  // the base spec's path as shown
  std::vector<uint64_t> seeds;
};

// `spec` has its defaults filled (labels, metrics, references' metrics,
// reference_label); `runs` are the sweep's runs in table order (variants, then
// seeds), finished or not. table.md gives a metric that variants have references
// for a column of them right after its own; runs.csv is per run and has none.
std::string RunsCsv(const fedkit::sweep::SweepSpec& spec, const std::vector<RunRecord>& runs);
std::string TableMarkdown(const fedkit::sweep::SweepSpec& spec, const TableContext& context,
                          const std::vector<RunRecord>& runs);
// JSON for curves.py: per variant the curve column's band over its finished
// runs, and per diagnostic each variant's mean per round.
std::string CurvesJson(const fedkit::sweep::SweepSpec& spec, const std::vector<RunRecord>& runs);

}  // namespace sweep

#endif  // TOOLS_SWEEP_REPORT_H_
