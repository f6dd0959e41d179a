#ifndef TOOLS_SWEEP_LAUNCHER_H_
#define TOOLS_SWEEP_LAUNCHER_H_

// Runs commands as child processes, a few at a time, each with its output in a
// log file, and measures each one's wall time and peak memory.

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace sweep {

struct Job {
  std::vector<std::string> argv;  // argv[0]: the program's path
  std::string log;  // stdout and stderr
  // Adds to the log (a run that continues) instead of truncating it first.
  bool append_log = false;
};

struct JobResult {
  bool ran = false;    // false: not started (the sweep was stopped first)
  int exit_code = -1;  // -1: could not start, or ended by a signal
  std::string how;     // "exit 1", "signal 9", "cannot start: ..."
  double wall_seconds = 0.0;
  double max_rss_mb = 0.0;  // the child's ru_maxrss

  bool ok() const { return ran && exit_code == 0; }
};

struct JobCallbacks {
  std::function<void(size_t job)> started;
  std::function<void(size_t job, const JobResult& result)> finished;
};

// Runs `jobs` in order, at most `parallel` at a time, and returns their results.
// Each child gets its own process group, so a terminal's Ctrl-C reaches this
// process alone: then (or on SIGTERM) no further job starts, every running one
// gets the signal passed on (run_experiment then checkpoints and exits 3; a
// second signal ends it at once), RunJobs returns once they have all ended, and
// `*stopped` is set.
std::vector<JobResult> RunJobs(const std::vector<Job>& jobs, int parallel,
                               const JobCallbacks& callbacks, bool* stopped);

}  // namespace sweep

#endif  // TOOLS_SWEEP_LAUNCHER_H_
