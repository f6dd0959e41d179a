#ifndef TOOLS_SWEEP_SWEEP_SPEC_H_
#define TOOLS_SWEEP_SWEEP_SPEC_H_

// Reading a sweep file (sweep.proto) and checking it whole before anything runs:
// its own fields, the base spec, and every variant's resolved spec as the runner
// will see it.

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "fl/spec.pb.h"
#include "tools/sweep/sweep.pb.h"

namespace sweep {

using Variant = fedkit::sweep::SweepSpec::Variant;

// What the command line changes of a sweep file.
struct SweepFlags {
  std::string out;          // absolute; empty: the file's `out` or its default
  std::optional<int> jobs;  // --jobs
};

struct Sweep {
  // With every default filled in: title, variant labels, metric columns, k and
  // labels, the metric of each reference, reference label, curve column and its
  // x column.
  fedkit::sweep::SweepSpec spec;
  std::string base_spec_path;  // absolute
  fedkit::ExperimentSpec base;
  std::string out;  // absolute
  int jobs = 1;
  // Threads per run, when the sweep sets them (see threads_per_job).
  std::optional<int> threads_per_job;
};

// Reads the sweep file at `path` (absolute) and checks it: parse errors as
// path:line:column, then every other problem at once, one per line, each naming
// its field ("variants[2].name: ...") or, for a variant's resolved spec, the
// variant and the spec's field ("variant \"elastic_1batch\": aggregator (elastic):
// options: ...").
absl::StatusOr<Sweep> LoadSweep(const std::string& path, const SweepFlags& flags);

// The runner's --set for (variant, seed): "seed: S", the sweep's set, the
// variant's set, then the thread limits when the sweep sets threads_per_job.
std::string RunOverride(const Sweep& sweep, const Variant& variant, uint64_t seed);

// The base spec with RunOverride applied: what the run's spec.textproto will hold
// (but for output and simulation, which the runner may fill in).
absl::StatusOr<fedkit::ExperimentSpec> RunSpec(const Sweep& sweep, const Variant& variant,
                                               uint64_t seed);

}  // namespace sweep

#endif  // TOOLS_SWEEP_SWEEP_SPEC_H_
