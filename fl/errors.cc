#include "fl/errors.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace fl {

void ErrorList::Add(absl::string_view path, absl::string_view message) {
  errors_.push_back(path.empty() ? std::string(message) : absl::StrCat(path, ": ", message));
}

void ErrorList::AddStatus(absl::string_view prefix, const absl::Status& status) {
  if (status.ok()) return;
  for (absl::string_view line : absl::StrSplit(status.message(), '\n', absl::SkipEmpty())) {
    errors_.push_back(absl::StrCat(prefix, line));
  }
}

absl::Status ErrorList::ToStatus() const {
  if (errors_.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
}

}  // namespace fl
