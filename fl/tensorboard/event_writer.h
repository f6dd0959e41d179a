#ifndef FL_TENSORBOARD_EVENT_WRITER_H_
#define FL_TENSORBOARD_EVENT_WRITER_H_

// Writes one TensorBoard event file: scalars by tag and step, and text. No
// TensorFlow: the events are fl/tensorboard/event.proto, framed as TFRecords
// (record_writer.h), which is all TensorBoard's reader expects.
//
//   auto writer = EventWriter::Create(dir);      // dir/events.out.tfevents.fedkit
//   (*writer)->AddScalars(7, {{"metrics/test_accuracy", 0.81}});
//
// Tags group in TensorBoard by what precedes their first '/'.

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "fl/tensorboard/record_writer.h"

namespace fl::tensorboard {

class EventWriter {
 public:
  // A fixed name, so that a resumed run (which writes every row again) replaces
  // the file instead of leaving TensorBoard two copies of the same steps.
  static constexpr char kFileName[] = "events.out.tfevents.fedkit";

  // Creates (truncates) dir/kFileName and writes the file-version event.
  static absl::StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& dir);

  // One event at `step` holding every (tag, value); values are stored as float,
  // as TensorBoard's scalars are.
  absl::Status AddScalars(int64_t step, const std::map<std::string, double>& values);
  // Markdown for TensorBoard's text dashboard.
  absl::Status AddText(int64_t step, const std::string& tag, const std::string& markdown);

 private:
  explicit EventWriter(RecordWriter records) : records_(std::move(records)) {}

  RecordWriter records_;
};

}  // namespace fl::tensorboard

#endif  // FL_TENSORBOARD_EVENT_WRITER_H_
