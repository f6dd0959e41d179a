#include "tools/sweep/progress.h"

#include <unistd.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sweep {

std::string FormatEta(double seconds) {
  const int64_t whole = std::llround(seconds);
  if (whole < 60) return absl::StrCat(whole, "s");
  // Rounded up: an ETA that says 0m while work remains reads as a hang.
  const int64_t minutes = (whole + 59) / 60;
  if (minutes < 60) return absl::StrCat(minutes, "m");
  return absl::StrFormat("%dh%02dm", minutes / 60, minutes % 60);
}

Progress::Progress(int total, int done, int jobs, std::FILE* out)
    : total_(total), done_(done), jobs_(jobs), out_(out), terminal_(isatty(fileno(out)) == 1) {}

void Progress::Started() {
  ++running_;
  Show();
}

void Progress::Finished(bool ok, double wall_seconds) {
  --running_;
  if (ok) {
    ++done_;
    walls_.push_back(wall_seconds);
  } else {
    ++failed_;
  }
  Show();
}

void Progress::Stopped() {
  --running_;
  Show();
}

void Progress::Message(const std::string& line) {
  // Clears the status line first, so the message does not run into it.
  if (terminal_ && showing_) std::fputs("\r\033[K", out_);
  std::fprintf(out_, "%s\n", line.c_str());
  showing_ = false;
  if (terminal_) Show();
}

void Progress::Close() {
  if (terminal_ && showing_) std::fputs("\n", out_);
  showing_ = false;
  std::fflush(out_);
}

std::string Progress::Line() const {
  std::string line =
      absl::StrCat("[done ", done_, "/", total_, ", ", running_, " running, ", failed_, " failed]");
  const int remaining = total_ - done_ - failed_;
  if (!walls_.empty() && remaining > 0) {
    double sum = 0.0;
    for (double wall : walls_) sum += wall;
    absl::StrAppend(&line, " ETA ", FormatEta(sum / walls_.size() * remaining / jobs_));
  }
  return line;
}

void Progress::Show() {
  if (terminal_) {
    std::fprintf(out_, "\r\033[K%s", Line().c_str());
    showing_ = true;
  } else {
    std::fprintf(out_, "%s\n", Line().c_str());
  }
  std::fflush(out_);
}

}  // namespace sweep
