#include "fl/tensorboard/event_writer.h"

#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "fl/status_macros.h"
#include "fl/tensorboard/event.pb.h"

namespace fl::tensorboard {
namespace {

constexpr int kDtString = 7;  // tensorflow.DataType DT_STRING

fedkit::tensorboard::Event NewEvent(int64_t step) {
  fedkit::tensorboard::Event event;
  event.set_wall_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  event.set_step(step);
  return event;
}

}  // namespace

absl::StatusOr<std::unique_ptr<EventWriter>> EventWriter::Create(const std::string& dir) {
  FL_ASSIGN_OR_RETURN(RecordWriter records, RecordWriter::Create(dir + "/" + kFileName));
  std::unique_ptr<EventWriter> writer(new EventWriter(std::move(records)));
  fedkit::tensorboard::Event version = NewEvent(0);
  version.set_file_version("brain.Event:2");
  FL_RETURN_IF_ERROR(writer->records_.Write(version.SerializeAsString()));
  return writer;
}

absl::Status EventWriter::AddScalars(int64_t step, const std::map<std::string, double>& values) {
  if (values.empty()) return absl::OkStatus();
  fedkit::tensorboard::Event event = NewEvent(step);
  for (const auto& [tag, value] : values) {
    auto* summary_value = event.mutable_summary()->add_value();
    summary_value->set_tag(tag);
    summary_value->set_simple_value(static_cast<float>(value));
  }
  return records_.Write(event.SerializeAsString());
}

absl::Status EventWriter::AddText(int64_t step, const std::string& tag,
                                  const std::string& markdown) {
  fedkit::tensorboard::Event event = NewEvent(step);
  auto* value = event.mutable_summary()->add_value();
  value->set_tag(tag);
  value->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  auto* tensor = value->mutable_tensor();
  tensor->set_dtype(kDtString);
  tensor->mutable_tensor_shape();  // no dimensions: a scalar string
  tensor->add_string_val(markdown);
  return records_.Write(event.SerializeAsString());
}

}  // namespace fl::tensorboard
