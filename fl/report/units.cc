#include "fl/report/units.h"

#include <cmath>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace fl::report {

std::string FormatSeconds(double seconds) {
  if (seconds < 1) return absl::StrFormat("%.2g s", seconds);
  if (seconds < 60) return absl::StrFormat("%.1f s", seconds);
  const int64_t whole = std::llround(seconds);
  if (whole < 3600) return absl::StrFormat("%dm %02ds", whole / 60, whole % 60);
  return absl::StrFormat("%dh %02dm", whole / 3600, whole % 3600 / 60);
}

ByteUnit ByteUnitFor(double largest) {
  ByteUnit unit;
  for (const ByteUnit& larger : {ByteUnit{1e3, "kB"}, ByteUnit{1e6, "MB"}, ByteUnit{1e9, "GB"},
                                 ByteUnit{1e12, "TB"}}) {
    if (largest >= larger.size) unit = larger;
  }
  return unit;
}

std::string FormatBytes(double bytes) {
  // What rounds up to 1000 of a unit is shown as 1 of the next.
  const ByteUnit unit = ByteUnitFor(bytes * 1.0005);
  return absl::StrFormat("%.3g %s", bytes / unit.size, unit.name);
}

}  // namespace fl::report
