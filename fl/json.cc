#include "fl/json.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace fl {

std::string JsonString(const std::string& text) {
  return absl::StrCat("\"",
                      absl::StrReplaceAll(text, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}),
                      "\"");
}

}  // namespace fl
