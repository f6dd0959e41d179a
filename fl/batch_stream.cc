#include "fl/batch_stream.h"

#include <algorithm>
#include <utility>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "absl/strings/str_cat.h"
#include "fl/augmentation.h"
#include "fl/batch_order_file.h"
#include "fl/fault_model.h"
#include "fl/seeding.h"
#include "fl/status_macros.h"

namespace fl {

BatchStream::BatchStream(const fedkit::ClientTrainingSpec& spec, Source source)
    : spec_(spec),
      source_(std::move(source)),
      batch_size_(std::min<int64_t>(spec.batch_size(), num_examples())),
      batches_per_epoch_((num_examples() + batch_size_ - 1) / batch_size_),
      flip_labels_(source_.faults != nullptr && source_.faults->FlipsLabels(source_.client_id)),
      rng_(source_.seed),
      augmentation_stream_(at::make_generator<at::CPUGeneratorImpl>(
          DeriveSeed(source_.seed, SeedStream::kAugmentation))) {}

absl::StatusOr<BatchStream> BatchStream::Create(const fedkit::ClientTrainingSpec& spec,
                                                Source source, int64_t min_batches) {
  BatchStream stream(spec, std::move(source));
  if (spec.batch_order() == fedkit::ClientTrainingSpec::FROM_FILE) {
    const Source& s = stream.source_;
    FL_ASSIGN_OR_RETURN(stream.recorded_,
                        ReadBatchOrders(spec.batch_order_dir(), s.round,
                                        absl::StrCat(s.client_id), s.indices));
    const int64_t epochs = (min_batches + stream.batches_per_epoch_ - 1) / stream.batches_per_epoch_;
    if (static_cast<int64_t>(stream.recorded_.size()) < epochs) {
      return absl::InvalidArgumentError(absl::StrCat(
          "client.batch_order_dir: round ", s.round, ", client ", s.client_id, ": ",
          stream.recorded_.size(), " recorded epochs, ", epochs, " needed"));
    }
  }
  return stream;
}

absl::StatusOr<Examples> BatchStream::Next() {
  const int64_t epoch = next_batch_ / batches_per_epoch_;
  const int64_t batch_in_epoch = next_batch_ % batches_per_epoch_;
  ++next_batch_;
  const at::Device device = source_.examples->x.device();
  std::vector<int64_t>& indices = source_.indices;
  if (batch_in_epoch == 0) {
    if (spec_.batch_order() == fedkit::ClientTrainingSpec::FROM_FILE) {
      if (epoch >= static_cast<int64_t>(recorded_.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "client.batch_order_dir: round ", source_.round, ", client ", source_.client_id,
            ": ", recorded_.size(), " recorded epochs, ", epoch + 1, " needed"));
      }
      order_ = at::tensor(recorded_[epoch], at::kLong).to(device);
    } else if (spec_.batch_order() == fedkit::ClientTrainingSpec::SHUFFLED || !order_.defined()) {
      if (spec_.batch_order() == fedkit::ClientTrainingSpec::SHUFFLED) {
        std::shuffle(indices.begin(), indices.end(), rng_);
      }
      order_ = at::tensor(indices, at::kLong).to(device);
    }
    if (!spec_.batch_order_record_dir().empty()) {
      absl::Status written = AppendBatchOrder(
          spec_.batch_order_record_dir(), source_.round, absl::StrCat(source_.client_id),
          recorded_.empty() ? indices : recorded_[epoch]);
      if (!written.ok()) {
        return absl::Status(written.code(),
                            absl::StrCat("client.batch_order_record_dir: ", written.message()));
      }
    }
  }
  const int64_t begin = batch_in_epoch * batch_size_;
  const at::Tensor batch = order_.narrow(0, begin, std::min(batch_size_, num_examples() - begin));
  Examples examples{source_.examples->x.index_select(0, batch),
                    source_.examples->y.index_select(0, batch)};
  if (source_.augmentation.enabled()) {
    examples.x = Augment(examples.x, source_.augmentation, augmentation_stream_);
  }
  if (flip_labels_) examples.y = source_.faults->FlippedLabels(examples.y);
  return examples;
}

}  // namespace fl
