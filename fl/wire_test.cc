#include "fl/wire.h"

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "fl/wire.pb.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

ModelState TwoEntries(double scale) {
  return ModelState({{"w", at::randn({2, 3}) * scale, false},
                     {"count", at::tensor({5}, at::kLong), true}});
}

void ExpectSameState(const ModelState& a, const ModelState& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.entries()[i].name, b.entries()[i].name);
    EXPECT_EQ(a.entries()[i].is_buffer, b.entries()[i].is_buffer);
    EXPECT_TRUE(at::equal(a.tensor(i), b.tensor(i))) << a.entries()[i].name;
  }
}

TEST(WireTest, TasksRoundTripExactlyWithHooksAndBroadcast) {
  RoundPlan plan;
  fedkit::TensorsMessage options;  // any message stands in for a hook's options
  options.add_tensors()->set_name("marker");
  plan.hooks.push_back({"scaffold", {}});
  plan.hooks[0].options.PackFrom(options);
  plan.hooks.push_back({"prox", {}});
  plan.broadcast["control"] = TwoEntries(3.0);
  const ModelState model = TwoEntries(1.0);
  absl::StatusOr<Task> task =
      ParseTask(SerializeTask(model, plan, 7), at::kCPU, "from the server");
  ASSERT_TRUE(task.ok()) << task.status();
  EXPECT_EQ(task->round, 7);
  ExpectSameState(task->model, model);
  ASSERT_EQ(task->plan.hooks.size(), 2u);
  EXPECT_EQ(task->plan.hooks[0].name, "scaffold");
  fedkit::TensorsMessage unpacked;
  ASSERT_TRUE(task->plan.hooks[0].options.UnpackTo(&unpacked));
  EXPECT_EQ(unpacked.tensors(0).name(), "marker");
  EXPECT_EQ(task->plan.hooks[1].name, "prox");
  ASSERT_EQ(task->plan.broadcast.count("control"), 1u);
  ExpectSameState(task->plan.broadcast.at("control"), plan.broadcast.at("control"));
}

TEST(WireTest, TruncatedOrDoubledTasksAreRefused) {
  const std::string bytes = SerializeTask(TwoEntries(1.0), RoundPlan(), 1);
  absl::StatusOr<Task> truncated =
      ParseTask(bytes.substr(0, bytes.size() - 1), at::kCPU, "from the server");
  EXPECT_EQ(truncated.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(), HasSubstr("from the server: record of"));
  absl::StatusOr<Task> doubled = ParseTask(bytes + bytes, at::kCPU, "from the server");
  EXPECT_THAT(doubled.status().message(), HasSubstr("a task is one record, got 2"));
}

TEST(WireTest, UpdatesRoundTripExactlyWithFailures) {
  ClientUpdate update;
  update.client_id = 17;
  update.delta = TwoEntries(1.0);
  update.num_examples = 40;
  update.local_steps = 3;
  update.planned_steps = 5;
  update.bytes_sent = 1234;
  update.metrics = {{"train_loss", 0.25}};
  update.extras["control"] = TwoEntries(2.0);
  update.extras["omega"] = ModelState({{"w", at::rand({4}, at::kDouble), false}});
  std::vector<IndexedUpdate> sent;
  sent.push_back({3, update});
  sent.push_back({5, absl::ResourceExhaustedError("out of memory on client 9")});

  auto received = ParseUpdates(SerializeUpdates(sent), at::kCPU, "rank 1");
  ASSERT_TRUE(received.ok()) << received.status();
  ASSERT_EQ(received->size(), 2u);
  EXPECT_EQ((*received)[0].cohort_index, 3);
  ASSERT_TRUE((*received)[0].update.ok());
  const ClientUpdate& got = *(*received)[0].update;
  EXPECT_EQ(got.client_id, 17);
  EXPECT_EQ(got.num_examples, 40);
  EXPECT_EQ(got.local_steps, 3);
  EXPECT_EQ(got.planned_steps, 5);
  EXPECT_EQ(got.bytes_sent, 1234);
  EXPECT_EQ(got.metrics, update.metrics);
  ExpectSameState(got.delta, update.delta);
  ASSERT_EQ(got.extras.size(), 2u);
  ExpectSameState(got.extras.at("control"), update.extras.at("control"));
  ExpectSameState(got.extras.at("omega"), update.extras.at("omega"));
  EXPECT_EQ((*received)[1].cohort_index, 5);
  EXPECT_EQ((*received)[1].update.status(), absl::ResourceExhaustedError("out of memory on client 9"));
}

TEST(WireTest, TruncatedUpdatesAreRefused) {
  ClientUpdate update;
  update.client_id = 2;
  update.delta = TwoEntries(1.0);
  const std::string bytes = SerializeUpdates({{0, update}});
  for (size_t cut : {size_t{3}, size_t{8}, bytes.size() / 2, bytes.size() - 1}) {
    auto received = ParseUpdates(bytes.substr(0, cut), at::kCPU, "rank 2");
    ASSERT_FALSE(received.ok()) << cut;
    EXPECT_THAT(received.status().message(), HasSubstr("rank 2"));
  }
  EXPECT_TRUE(ParseUpdates("", at::kCPU, "rank 2")->empty());
}

TEST(WireTest, ClientStatesAndTensorMapsRoundTrip) {
  std::map<ClientStateStore::Key, TensorMap> states;
  states[{4, "scaffold"}] = {{"c", at::randn({3})}};
  states[{9, "efl"}] = {{"residual", at::randn({2, 2})}, {"steps", at::tensor({7}, at::kLong)}};
  auto got = ParseClientStates(SerializeClientStates(states), at::kCPU, "rank 3");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), states.size());
  for (const auto& [key, tensors] : states) {
    ASSERT_EQ(got->at(key).size(), tensors.size());
    for (const auto& [name, tensor] : tensors) EXPECT_TRUE(at::equal(got->at(key).at(name), tensor));
  }

  const TensorMap aggregator_state = {{"m", at::randn({5})}, {"v", at::rand({5}, at::kDouble)}};
  auto restored = ParseTensors(SerializeTensors(aggregator_state), at::kCPU, "rank 0");
  ASSERT_TRUE(restored.ok()) << restored.status();
  for (const auto& [name, tensor] : aggregator_state) EXPECT_TRUE(at::equal(restored->at(name), tensor));
  EXPECT_TRUE(ParseTensors(SerializeTensors({}), at::kCPU, "rank 0")->empty());
  EXPECT_FALSE(ParseTensors("\x0a\x05garbage", at::kCPU, "rank 0").ok());
}

TEST(WireTest, EqualUpdatesAreEqualBytes) {
  // Protobuf orders a map's entries by a hash seeded afresh for each map, so
  // without deterministic serialisation two messages with these metrics differ.
  ClientUpdate update;
  update.client_id = 3;
  update.delta = TwoEntries(1.0);
  for (int i = 0; i < 16; ++i) update.metrics["metric_" + std::to_string(i)] = i;
  std::vector<IndexedUpdate> updates;
  updates.push_back({0, update});
  const std::string first = SerializeUpdates(updates);
  for (int i = 0; i < 20; ++i) ASSERT_EQ(SerializeUpdates(updates), first) << "serialisation " << i;
}

TEST(WireTest, AnEmptyShapeWhoseSizesOverflowIsRefused) {
  // Found by //fl:wire_fuzzer: zero elements, but LibTorch sizes the storage from
  // every dimension and threw past the parser, ending the process.
  fedkit::TensorsMessage message;
  fedkit::CheckpointTensor& record = *message.add_tensors();
  record.set_name("momentum");
  record.set_dtype("Double");
  for (int64_t size : {int64_t{1} << 40, int64_t{1} << 40, int64_t{0}}) record.add_shape(size);
  auto parsed = ParseTensors(message.SerializeAsString(), at::kCPU, "rank 2");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("rank 2: momentum: its shape's sizes multiply past 2^63"));
}

}  // namespace
}  // namespace fl
