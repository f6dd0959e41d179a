#ifndef FL_CLIENT_TRACE_H_
#define FL_CLIENT_TRACE_H_

// A per-client trace of device speeds, bandwidths and availability on the virtual
// clock (client.system.trace_path; docs/virtual-clock.md section 6). The file is
// CSV with a header naming its columns, in any order:
//
//   client,speed,download_bytes_per_second,upload_bytes_per_second,available
//   0,1.7,2000000,500000,0-3600 7200-inf
//   1,0.3,,,
//
// `client` is required: the trace's devices 0 .. R-1, each on one row. Client k of
// the federation is device k mod R, so a trace of R devices serves any number of
// clients. Every other column is optional, and an empty cell means "not in the
// trace": the spec's own value (its speed draw, its bandwidth draws) applies.
// `available` lists the device's online windows in virtual seconds, "start-end"
// separated by spaces, sorted and apart (each starts after the previous one
// ends), end "inf" for open-ended; an empty cell: always online.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fl {

// An interval [start, end) of virtual seconds in which a client is online.
struct OnlineWindow {
  double start = 0.0;
  double end = std::numeric_limits<double>::infinity();
};

class ClientTrace {
 public:
  struct Device {
    std::optional<double> speed;
    std::optional<double> download_bytes_per_second;
    std::optional<double> upload_bytes_per_second;
    // Empty: always online.
    std::vector<OnlineWindow> available;
  };

  // Parses `csv`; errors name `path`, the line and the column.
  static absl::StatusOr<ClientTrace> Parse(absl::string_view csv, const std::string& path);
  // Reads and parses the file at `path` (relative paths as fl/index_files.h's
  // ResolveUserPath takes them).
  static absl::StatusOr<ClientTrace> Load(const std::string& path);

  int num_devices() const { return static_cast<int>(devices_.size()); }
  // Client `client`'s device: row client mod num_devices().
  const Device& ForClient(int64_t client) const;
  // The first of the client's windows that ends after `at`: it is online at `at`
  // when the window's start <= at. {inf, inf} when it never is again.
  OnlineWindow NextWindow(int64_t client, double at) const;

 private:
  explicit ClientTrace(std::vector<Device> devices) : devices_(std::move(devices)) {}

  std::vector<Device> devices_;
};

}  // namespace fl

#endif  // FL_CLIENT_TRACE_H_
