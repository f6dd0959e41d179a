#include "fl/spec_loader.h"

#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "fl/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace fl {
namespace {

class ErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  explicit ErrorCollector(absl::string_view source) : source_(source) {}

  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    // The parser counts from 0.
    errors_.push_back(absl::StrCat(source_, ":", line + 1, ":", column + 1, ": ", message));
  }
  void AddWarning(int line, google::protobuf::io::ColumnNumber column,
                  const std::string& message) override {
    AddError(line, column, message);
  }

  absl::Status ToStatus() const {
    return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
  }

 private:
  std::string source_;
  std::vector<std::string> errors_;
};

}  // namespace

absl::Status MergeTextFormat(absl::string_view text, absl::string_view source,
                             google::protobuf::Message& message) {
  ErrorCollector errors(source);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.MergeFromString(std::string(text), &message)) return errors.ToStatus();
  return absl::OkStatus();
}

absl::StatusOr<fedkit::ExperimentSpec> ParseSpec(absl::string_view text,
                                                 absl::string_view source) {
  fedkit::ExperimentSpec spec;
  absl::Status status = MergeTextFormat(text, source, spec);
  if (!status.ok()) return status;
  return spec;
}

absl::StatusOr<fedkit::ExperimentSpec> LoadSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read spec file ", path));
  std::stringstream text;
  text << in.rdbuf();
  return ParseSpec(text.str(), path);
}

absl::Status ApplyOverride(absl::string_view fragment, fedkit::ExperimentSpec& spec) {
  // Merge into a copy, so a bad fragment leaves the spec as it was.
  fedkit::ExperimentSpec merged = spec;
  FL_RETURN_IF_ERROR(MergeTextFormat(fragment, "--set", merged));
  spec = std::move(merged);
  return absl::OkStatus();
}

std::string SpecToText(const fedkit::ExperimentSpec& spec) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetExpandAny(true);
  printer.PrintToString(spec, &text);
  return text;
}

std::string OutputDirOf(const fedkit::ExperimentSpec& spec) {
  return spec.output().dir().empty() ? absl::StrCat("results/", spec.name()) : spec.output().dir();
}

}  // namespace fl
