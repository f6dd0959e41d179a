#include "fl/deploy/evaluation_task.h"

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl::deploy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(EvaluationTaskTest, IndicesAndCountsMakeTheRoundTrip) {
  auto indices = EvaluationIndices(EvaluationBroadcast({7, 0, 42}), "task 3");
  ASSERT_TRUE(indices.ok()) << indices.status();
  EXPECT_THAT(*indices, ElementsAre(7, 0, 42));
  auto read = ReadEvaluationAnswer(EvaluationAnswer(5, {2, 3}), 5, "client 5");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->correct, 2);
  EXPECT_EQ(read->examples, 3);
}

TEST(EvaluationTaskTest, RefusesWhatIsNotAnEvaluation) {
  // A training task's plan (no indices), or indices that are not int64.
  EXPECT_THAT(EvaluationIndices({}, "task 3").status().message(),
              HasSubstr("task 3: an evaluation task carries its test indices"));
  ExtraStates floats;
  floats["test_indices"] = ModelState({{"indices", at::ones({3}), true}});
  EXPECT_FALSE(EvaluationIndices(floats, "task 3").ok());
  // Another client's answer, a training outcome, counts that are not counts.
  EXPECT_THAT(ReadEvaluationAnswer(EvaluationAnswer(4, {1, 1}), 5, "client 5").status().message(),
              HasSubstr("client 5: the answer says it is client 4's"));
  ClientUpdate training;
  training.client_id = 5;
  EXPECT_THAT(ReadEvaluationAnswer(training, 5, "client 5").status().message(),
              HasSubstr("lacks test_correct or test_examples"));
  for (const OwnEvaluation& bad : {OwnEvaluation{4, 3}, OwnEvaluation{-1, 3}, OwnEvaluation{0, 0}}) {
    EXPECT_THAT(ReadEvaluationAnswer(EvaluationAnswer(5, bad), 5, "client 5").status().message(),
                HasSubstr("is not a count"));
  }
  ClientUpdate fractional = EvaluationAnswer(5, {1, 3});
  fractional.metrics["test_correct"] = 1.5;
  EXPECT_FALSE(ReadEvaluationAnswer(fractional, 5, "client 5").ok());
}

}  // namespace
}  // namespace fl::deploy
