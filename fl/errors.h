#ifndef FL_ERRORS_H_
#define FL_ERRORS_H_

// Collects every problem found in a spec or options message, so a user sees all of
// them at once instead of fixing one per run.
//
//   ErrorList errors;
//   if (options.lr() <= 0) errors.Add("lr", absl::StrCat("must be > 0, got ", options.lr()));
//   return errors.ToStatus();   // "lr: must be > 0, got -0.5"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fl {

class ErrorList {
 public:
  // Records "path: message".
  void Add(absl::string_view path, absl::string_view message);
  // Records every line of a non-OK status, each prefixed with "prefix".
  void AddStatus(absl::string_view prefix, const absl::Status& status);

  bool empty() const { return errors_.empty(); }
  const std::vector<std::string>& errors() const { return errors_; }

  // OK when empty, otherwise InvalidArgument with one error per line.
  absl::Status ToStatus() const;

 private:
  std::vector<std::string> errors_;
};

}  // namespace fl

#endif  // FL_ERRORS_H_
