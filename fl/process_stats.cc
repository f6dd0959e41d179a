#include "fl/process_stats.h"

#include <fstream>
#include <string>

namespace fl {

int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "... kB"
  }
  return 0;
}

}  // namespace fl
