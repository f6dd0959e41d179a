#include <ATen/ATen.h>
#include <torch/utils.h>

#include "fl/model_state.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "models/char_lstm/char_lstm_options.pb.h"
#include "models/common/model_test_util.h"

namespace models {
namespace {

using fedkit::models::CharLstmOptions;
using ::testing::IsEmpty;

CharLstmOptions Small() {
  CharLstmOptions options;
  options.set_embedding_dim(4);
  options.set_hidden(16);
  return options;
}

// Character ids in [0, vocab) as floats, the dataset contract.
at::Tensor Ids(int64_t batch, int64_t seq_len, int64_t vocab) {
  return at::randint(vocab, {batch, seq_len}, at::kFloat);
}

TEST(CharLstmTest, ParameterCountIsLeafs) {
  // Vocabulary 80: embedding 80*8 = 640; LSTM layer 1 4*256*8 + 4*256*256 + 2*4*256 =
  // 272,384; layer 2 4*256*256 * 2 + 2*4*256 = 526,336; linear 256*80+80 = 20,560.
  auto model = CreateModel("char_lstm", CharLstmOptions(), {80}, 80);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(fl::ModelState::FromModule(**model).NumParameters(), 819920);
  EXPECT_THAT(BufferNames(**model), IsEmpty());
}

TEST(CharLstmTest, TrainStepOnFloatIds) {
  torch::manual_seed(0);
  auto model = *CreateModel("char_lstm", Small(), {12}, 30);
  ExpectTrainStep(*model, Ids(3, 12, 30), 30);
}

TEST(CharLstmTest, ReadsTheWholeSequence) {
  torch::manual_seed(0);
  auto model = *CreateModel("char_lstm", Small(), {6}, 10);
  model->eval();
  at::Tensor x = Ids(1, 6, 10);
  at::Tensor y = x.clone();
  y[0][0] = x[0][0].item<float>() == 0 ? 1 : 0;  // only the first character differs
  EXPECT_FALSE(at::allclose(model->Forward(x), model->Forward(y)));
  // The same sequence in two rows of a batch gives the same logits.
  at::Tensor both = model->Forward(at::cat({x, x}));
  EXPECT_TRUE(at::allclose(both[0], both[1]));
}

TEST(CharLstmTest, RejectsBadOptionsAndShapes) {
  CharLstmOptions options;
  options.set_embedding_dim(0);
  options.set_hidden(-2);
  options.set_layers(0);
  EXPECT_EQ(CreateModel("char_lstm", options, {1, 28, 28}, 1).status().message(),
            "options.embedding_dim: must be >= 1, got 0\n"
            "options.hidden: must be >= 1, got -2\n"
            "options.layers: must be >= 1, got 0\n"
            "input_shape: must be {seq_len} of character ids (e.g. {80}), got {1, 28, 28}\n"
            "num_classes: needs a classification dataset (>= 2 classes), got 1");
}

}  // namespace
}  // namespace models
