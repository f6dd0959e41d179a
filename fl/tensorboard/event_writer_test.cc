#include "fl/tensorboard/event_writer.h"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fl/tensorboard/event.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::tensorboard {
namespace {

using fedkit::tensorboard::Event;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// The events of `path`, each record's framing checked.
std::vector<Event> ReadEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string bytes = buffer.str();
  std::vector<Event> events;
  size_t at = 0;
  while (at < bytes.size()) {
    uint64_t length = 0;
    for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[at + i]);
    const std::string payload = bytes.substr(at + 12, length);
    EXPECT_EQ(bytes.substr(at, 12 + length + 4), FrameRecord(payload)) << "record at " << at;
    Event event;
    EXPECT_TRUE(event.ParseFromString(payload));
    events.push_back(event);
    at += 12 + length + 4;
  }
  return events;
}

TEST(EventWriterTest, FileVersionFirstThenScalarsAndText) {
  const std::string dir = TempDir();
  absl::StatusOr<std::unique_ptr<EventWriter>> writer = EventWriter::Create(dir);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->AddScalars(3, {{"metrics/test_accuracy", 0.8125}, {"b", -2.5}}).ok());
  ASSERT_TRUE((*writer)->AddScalars(4, {}).ok());
  ASSERT_TRUE((*writer)->AddText(0, "spec", "    name: \"x\"\n").ok());

  const std::vector<Event> events = ReadEvents(dir + "/" + EventWriter::kFileName);
  ASSERT_EQ(events.size(), 3u);  // an empty set of scalars writes nothing
  EXPECT_EQ(events[0].file_version(), "brain.Event:2");
  EXPECT_GT(events[0].wall_time(), 1.7e9);  // seconds since 1970, not since the run began

  EXPECT_EQ(events[1].step(), 3);
  ASSERT_EQ(events[1].summary().value_size(), 2);
  EXPECT_EQ(events[1].summary().value(0).tag(), "b");
  EXPECT_EQ(events[1].summary().value(0).simple_value(), -2.5f);
  EXPECT_EQ(events[1].summary().value(1).tag(), "metrics/test_accuracy");
  EXPECT_EQ(events[1].summary().value(1).simple_value(), 0.8125f);

  const auto& text = events[2].summary().value(0);
  EXPECT_EQ(text.tag(), "spec");
  EXPECT_EQ(text.metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(text.tensor().dtype(), 7);  // DT_STRING
  EXPECT_EQ(text.tensor().tensor_shape().dim_size(), 0);
  ASSERT_EQ(text.tensor().string_val_size(), 1);
  EXPECT_EQ(text.tensor().string_val(0), "    name: \"x\"\n");
}

}  // namespace
}  // namespace fl::tensorboard
