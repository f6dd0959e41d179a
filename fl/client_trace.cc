#include "fl/client_trace.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fl/index_files.h"
#include "glog/logging.h"

namespace fl {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

const char* const kColumns[] = {"client", "speed", "download_bytes_per_second",
                                "upload_bytes_per_second", "available"};

absl::StatusOr<std::vector<OnlineWindow>> ParseWindows(absl::string_view cell,
                                                       const std::string& where) {
  std::vector<OnlineWindow> windows;
  for (absl::string_view text : absl::StrSplit(cell, ' ', absl::SkipEmpty())) {
    const std::vector<absl::string_view> bounds = absl::StrSplit(text, '-');
    OnlineWindow window;
    const bool parsed = bounds.size() == 2 && absl::SimpleAtod(bounds[0], &window.start) &&
                        (bounds[1] == "inf" || absl::SimpleAtod(bounds[1], &window.end));
    if (!parsed || !std::isfinite(window.start) || window.start < 0 ||
        !(window.end > window.start)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": window \"", text,
          "\" is not \"start-end\" with 0 <= start < end (virtual seconds; end may be inf)"));
    }
    if (!windows.empty() && window.start <= windows.back().end) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": window \"", text, "\" does not start after the previous one ends (",
          windows.back().end, "); windows must be sorted, disjoint and apart"));
    }
    windows.push_back(window);
  }
  return windows;
}

absl::StatusOr<std::optional<double>> ParsePositive(absl::string_view cell,
                                                    const std::string& where) {
  if (cell.empty()) return std::nullopt;
  double value;
  if (!absl::SimpleAtod(cell, &value) || !(value > 0) || !std::isfinite(value)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": \"", cell, "\" is not a finite number > 0 (or empty)"));
  }
  return value;
}

}  // namespace

absl::StatusOr<ClientTrace> ClientTrace::Parse(absl::string_view csv, const std::string& path) {
  std::map<std::string, int> column_of;
  std::vector<std::string> names;
  std::map<int64_t, Device> devices;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(csv, '\n')) {
    ++line_number;
    line = absl::StripSuffix(line, "\r");
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    const std::vector<std::string> cells = absl::StrSplit(line, ',');
    if (names.empty()) {
      for (const std::string& cell : cells) {
        const std::string name(absl::StripAsciiWhitespace(cell));
        if (std::find(std::begin(kColumns), std::end(kColumns), name) == std::end(kColumns)) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ":", line_number, ": unknown column \"", name,
                           "\"; the columns are ", absl::StrJoin(kColumns, ", ")));
        }
        if (!column_of.emplace(name, static_cast<int>(names.size())).second) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ":", line_number, ": column \"", name, "\" appears twice"));
        }
        names.push_back(name);
      }
      if (column_of.count("client") == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ":", line_number, ": the header has no \"client\" column"));
      }
      continue;
    }
    if (cells.size() != names.size()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", cells.size(),
                                                     " cells, the header has ", names.size()));
    }
    auto cell = [&](const char* name) -> absl::string_view {
      auto it = column_of.find(name);
      return it == column_of.end() ? absl::string_view()
                                   : absl::StripAsciiWhitespace(cells[it->second]);
    };
    auto where = [&](const char* name) { return absl::StrCat(path, ":", line_number, ": ", name); };
    int64_t client;
    if (!absl::SimpleAtoi(cell("client"), &client) || client < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(where("client"), ": \"", cell("client"), "\" is not an id >= 0"));
    }
    Device device;
    absl::StatusOr<std::optional<double>> speed = ParsePositive(cell("speed"), where("speed"));
    absl::StatusOr<std::optional<double>> down =
        ParsePositive(cell("download_bytes_per_second"), where("download_bytes_per_second"));
    absl::StatusOr<std::optional<double>> up =
        ParsePositive(cell("upload_bytes_per_second"), where("upload_bytes_per_second"));
    absl::StatusOr<std::vector<OnlineWindow>> windows =
        ParseWindows(cell("available"), where("available"));
    for (const absl::Status& status : {speed.status(), down.status(), up.status(),
                                       windows.status()}) {
      if (!status.ok()) return status;
    }
    device.speed = *speed;
    device.download_bytes_per_second = *down;
    device.upload_bytes_per_second = *up;
    device.available = *std::move(windows);
    if (!devices.emplace(client, std::move(device)).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(where("client"), ": device ", client, " has a row already"));
    }
  }
  if (devices.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": no devices (a header and rows)"));
  }
  std::vector<Device> ordered;
  for (auto& [client, device] : devices) {
    if (client != static_cast<int64_t>(ordered.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no row for device ", ordered.size(), " (the devices must be 0 .. ",
                       devices.size() - 1, ", each once)"));
    }
    ordered.push_back(std::move(device));
  }
  return ClientTrace(std::move(ordered));
}

absl::StatusOr<ClientTrace> ClientTrace::Load(const std::string& path) {
  const std::string resolved = ResolveUserPath(path);
  absl::StatusOr<std::string> csv = ReadTextFile(resolved, "client trace");
  if (!csv.ok()) return csv.status();
  return Parse(*csv, resolved);
}

const ClientTrace::Device& ClientTrace::ForClient(int64_t client) const {
  CHECK_GE(client, 0);
  return devices_[static_cast<size_t>(client % static_cast<int64_t>(devices_.size()))];
}

OnlineWindow ClientTrace::NextWindow(int64_t client, double at) const {
  const std::vector<OnlineWindow>& windows = ForClient(client).available;
  if (windows.empty()) return OnlineWindow{};
  auto it = std::upper_bound(windows.begin(), windows.end(), at,
                             [](double t, const OnlineWindow& w) { return t < w.end; });
  return it == windows.end() ? OnlineWindow{kInfinity, kInfinity} : *it;
}

}  // namespace fl
