#include "fl/deploy/run_identity.h"

#include <openssl/sha.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "fl/index_files.h"
#include "fl/spec_loader.h"

namespace fl::deploy {

std::string SpecDigest(const fedkit::ExperimentSpec& spec) {
  fedkit::ExperimentSpec shared = spec;
  shared.clear_output();
  shared.clear_simulation();
  const std::string text = SpecToText(shared);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

absl::StatusOr<std::map<int64_t, std::string>> ReadTokens(const std::string& path) {
  const std::string resolved = ResolveUserPath(path);
  absl::StatusOr<std::string> text = ReadTextFile(resolved, "tokens file");
  if (!text.ok()) return text.status();
  std::map<int64_t, std::string> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    int64_t id;
    if (fields.size() != 2 || !absl::SimpleAtoi(fields[0], &id) || id < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(resolved, ":", line_number, ": expected \"<client id> <token>\""));
    }
    if (!tokens.emplace(id, std::string(fields[1])).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(resolved, ":", line_number, ": client ", id, " has a token already"));
    }
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(resolved, ": no tokens"));
  }
  return tokens;
}

absl::StatusOr<std::string> ReadToken(const std::string& path) {
  const std::string resolved = ResolveUserPath(path);
  absl::StatusOr<std::string> text = ReadTextFile(resolved, "token file");
  if (!text.ok()) return text.status();
  const std::string token(
      absl::StripAsciiWhitespace(std::vector<absl::string_view>(absl::StrSplit(*text, '\n'))[0]));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat(resolved, ": empty token"));
  return token;
}

}  // namespace fl::deploy
