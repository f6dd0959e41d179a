#ifndef FL_PROCESS_STATS_H_
#define FL_PROCESS_STATS_H_

#include <cstdint>

namespace fl {

// The process's peak resident set size so far (VmHWM in /proc/self/status), in
// bytes; 0 where /proc is not available.
int64_t PeakRssBytes();

}  // namespace fl

#endif  // FL_PROCESS_STATS_H_
