#ifndef FL_REPORT_UNITS_H_
#define FL_REPORT_UNITS_H_

// Durations and byte counts as people read them, for the report pages and tables.

#include <string>

namespace fl::report {

// "0.038 s" below a second, "12.5 s" below a minute, "3m 07s" below an hour,
// else "2h 05m".
std::string FormatSeconds(double seconds);

// A decimal unit for byte counts up to `largest`: B, kB, MB, GB or TB.
struct ByteUnit {
  double size = 1;
  const char* name = "B";
};
ByteUnit ByteUnitFor(double largest);

// `bytes` in its own unit with 3 significant digits: "6.43 GB", "611 kB", "512 B".
std::string FormatBytes(double bytes);

}  // namespace fl::report

#endif  // FL_REPORT_UNITS_H_
