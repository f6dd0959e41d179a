#ifndef FL_SPEC_LOADER_H_
#define FL_SPEC_LOADER_H_

// Reading ExperimentSpecs from text format. Unknown fields, unknown Any types and
// syntax errors are errors with `source:line:column`.

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/spec.pb.h"
#include "google/protobuf/message.h"

namespace fl {

// Merges text-format `text` into `message` (any message type); errors name
// `source:line:column`.
absl::Status MergeTextFormat(absl::string_view text, absl::string_view source,
                             google::protobuf::Message& message);

// Parses `text`; `source` names it in errors (a file path, "--set").
absl::StatusOr<fedkit::ExperimentSpec> ParseSpec(absl::string_view text, absl::string_view source);

// Reads and parses the file at `path`.
absl::StatusOr<fedkit::ExperimentSpec> LoadSpecFile(const std::string& path);

// Where a run of `spec` writes its results: output.dir, or results/<name>.
std::string OutputDirOf(const fedkit::ExperimentSpec& spec);

// `spec` in text format with every Any expanded (what ParseSpec reads back).
std::string SpecToText(const fedkit::ExperimentSpec& spec);

// Merges a text-format fragment into `spec`: singular fields it sets replace the
// spec's (sub-messages merge field by field), repeated fields append, and an Any
// it sets replaces the whole Any. E.g. "server { rounds: 3 }". On an error the
// spec is left unchanged.
absl::Status ApplyOverride(absl::string_view fragment, fedkit::ExperimentSpec& spec);

}  // namespace fl

#endif  // FL_SPEC_LOADER_H_
