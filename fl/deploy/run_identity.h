#ifndef FL_DEPLOY_RUN_IDENTITY_H_
#define FL_DEPLOY_RUN_IDENTITY_H_

// What ties a client process to a deployed run: the digest of the spec both were
// started from, and the per-client tokens.

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "fl/spec.pb.h"

namespace fl::deploy {

// SHA-256 (hex) of the spec in text format, without output and simulation, which
// may differ between the server and its clients (folders, threads).
std::string SpecDigest(const fedkit::ExperimentSpec& spec);

// The server's tokens file: one "<client id> <token>" per line; blank lines and
// lines starting with # are skipped. Errors name the file and line: a malformed
// line, an id twice, an empty token.
absl::StatusOr<std::map<int64_t, std::string>> ReadTokens(const std::string& path);

// A client's token file: its first line, which must not be empty.
absl::StatusOr<std::string> ReadToken(const std::string& path);

}  // namespace fl::deploy

#endif  // FL_DEPLOY_RUN_IDENTITY_H_
