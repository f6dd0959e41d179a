#include "fl/deploy/payload.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace fl::deploy {

absl::StatusOr<PayloadLimits> PayloadLimitsFromFlags(int64_t max_payload_mb,
                                                     int64_t max_message_kb) {
  PayloadLimits limits;
  limits.max_payload_bytes = max_payload_mb << 20;
  limits.max_message_bytes = max_message_kb << 10;
  if (limits.max_message_bytes < kMinMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--max_message_kb: must be >= ",
                                                   kMinMessageBytes >> 10, ", got ", max_message_kb));
  }
  return limits;
}

int64_t ChunkBytesFor(const PayloadLimits& own, int64_t peer_max_message) {
  // A Chunk in its oneof: two tags and two length varints, far below this.
  constexpr int64_t kFraming = 1024;
  const int64_t peer = peer_max_message > 0 ? peer_max_message : int64_t{4} << 20;
  return std::max<int64_t>(1, std::min(own.chunk_bytes, peer - kFraming));
}

std::vector<absl::string_view> Chunks(absl::string_view payload, int64_t chunk_bytes) {
  CHECK_GT(chunk_bytes, 0);
  std::vector<absl::string_view> chunks;
  for (size_t at = 0; at < payload.size(); at += static_cast<size_t>(chunk_bytes)) {
    chunks.push_back(payload.substr(at, static_cast<size_t>(chunk_bytes)));
  }
  return chunks;
}

absl::StatusOr<PayloadAssembler> PayloadAssembler::Start(int64_t declared, int64_t limit,
                                                         std::string what) {
  if (declared < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": declared size ", declared, " < 0"));
  }
  if (declared > limit) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": declared size ", declared, " bytes exceeds the limit of ", limit));
  }
  PayloadAssembler assembler(declared, std::move(what));
  assembler.data_.reserve(static_cast<size_t>(declared));
  return assembler;
}

absl::Status PayloadAssembler::Add(absl::string_view chunk) {
  if (static_cast<int64_t>(data_.size() + chunk.size()) > declared_) {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": a chunk of ", chunk.size(),
                                                   " bytes runs past the declared ", declared_,
                                                   " (", data_.size(), " received)"));
  }
  data_.append(chunk.data(), chunk.size());
  return absl::OkStatus();
}

std::string PayloadAssembler::Take() && {
  CHECK(complete()) << what_ << ": " << data_.size() << " of " << declared_ << " bytes";
  return std::move(data_);
}

}  // namespace fl::deploy
