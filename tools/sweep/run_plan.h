#ifndef TOOLS_SWEEP_RUN_PLAN_H_
#define TOOLS_SWEEP_RUN_PLAN_H_

// A sweep's runs and what the results folder already holds of them. Run (variant
// v, seed s) lives in <out>/<v>_seed<s>/ with its output in <out>/<v>_seed<s>.log,
// the layout the hand-written reproduction scripts used, so their results count.

#include <cstdint>
#include <string>
#include <vector>

#include "fl/spec.pb.h"
#include "tools/sweep/sweep_spec.h"

namespace sweep {

struct Run {
  const Variant* variant = nullptr;  // in the sweep's spec
  uint64_t seed = 0;
  std::string dir;  // absolute
  std::string log;  // absolute
};

// Every (variant, seed), variants outermost, in the orders given.
std::vector<Run> PlanRuns(const Sweep& sweep, const std::vector<const Variant*>& variants,
                          const std::vector<uint64_t>& seeds);

enum class DiskState {
  kAbsent,       // neither folder nor log
  kInterrupted,  // a folder or a log but no summary.json: stopped, or failed
  kFinished,     // summary.json
};
DiskState StateOnDisk(const Run& run);

// Empty when the spec.textproto in finished run folder `dir` is `expected` but for
// output and simulation (where results go and how many threads, neither of which
// changes them); else the first difference, or why the file cannot be read.
std::string StaleReason(const std::string& dir, const fedkit::ExperimentSpec& expected);

}  // namespace sweep

#endif  // TOOLS_SWEEP_RUN_PLAN_H_
