#ifndef TOOLS_SWEEP_PROGRESS_H_
#define TOOLS_SWEEP_PROGRESS_H_

// One status line over a whole sweep, "[done 12/36, 2 running, 1 failed] ETA 14m",
// rewritten in place on a terminal and printed as a new line at each change
// otherwise (a log file then reads as a history).

#include <cstdio>
#include <string>
#include <vector>

namespace sweep {

// "45s", "14m", "2h05m".
std::string FormatEta(double seconds);

class Progress {
 public:
  // `total` runs, of which `done` finished before this invocation; `jobs` at a time.
  Progress(int total, int done, int jobs, std::FILE* out);

  void Started();
  void Finished(bool ok, double wall_seconds);
  // A run that ended because the sweep was stopped: neither done nor failed.
  void Stopped();
  // Prints `line` above the status line.
  void Message(const std::string& line);
  // Ends the status line (on a terminal it is left showing the final counts).
  void Close();

  // The status line. ETA: the mean wall time of the runs this invocation
  // finished, times the runs not yet finished, over the jobs.
  std::string Line() const;

 private:
  void Show();

  int total_;
  int done_;
  int jobs_;
  int running_ = 0;
  int failed_ = 0;
  std::vector<double> walls_;
  std::FILE* out_;
  bool terminal_;
  bool showing_ = false;
};

}  // namespace sweep

#endif  // TOOLS_SWEEP_PROGRESS_H_
