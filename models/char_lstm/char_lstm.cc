// Character-level next-character model for Shakespeare (FedAvg, McMahan et al.,
// AISTATS 2017, Sec. 3: "embeds each of these into a learned 8 dimensional space. The
// embedded characters are then processed through 2 LSTM layers, each with 256 nodes.
// Finally the output of the second LSTM layer is sent to a softmax output layer with
// one node per character"; LEAF's Shakespeare model is the same, reading the last
// step's output). The LSTM model of EFL's Shakespeare runs (Ma et al., 2021).
//
// Input: a float tensor {batch, seq_len} of character ids (the dataset contract for
// text: ids in [0, num_classes), stored as floats like every other input); they are
// converted to integers here. Output: logits {batch, num_classes} for the character
// after the sequence, so the vocabulary is the dataset's num_classes.
//
// Parameters with LEAF's 80-character vocabulary (LibTorch's LSTM has two bias
// vectors per layer, as PyTorch's): embedding 80*8 = 640, layer 1 4*256*(8+256) +
// 2*4*256 = 272,384, layer 2 4*256*(256+256) + 2*4*256 = 526,336, output 256*80+80 =
// 20,560: 819,920 (LEAF's TensorFlow cell has one bias: 817,872). The FedAvg paper
// states 866,578 for its own vocabulary, which it does not give.
//
//   model {
//     name: "char_lstm"
//     options { [type.googleapis.com/fedkit.models.CharLstmOptions] { hidden: 256 layers: 2 } }
//   }

#include <memory>
#include <tuple>

#include <ATen/ATen.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include "absl/strings/str_cat.h"
#include "fl/errors.h"
#include "fl/model.h"
#include "fl/registry.h"
#include "fl/status_macros.h"
#include "models/char_lstm/char_lstm_options.pb.h"
#include "models/common/model_args.h"

namespace models {
namespace {

class CharLstm : public fl::Model {
 public:
  CharLstm(int64_t vocab, int64_t embedding_dim, int64_t hidden, int64_t layers)
      : embedding_(register_module("embedding", torch::nn::Embedding(vocab, embedding_dim))),
        lstm_(register_module(
            "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(embedding_dim, hidden)
                                        .num_layers(layers)
                                        .batch_first(true)))),
        linear_(register_module("linear", torch::nn::Linear(hidden, vocab))) {}

  at::Tensor Forward(const at::Tensor& x) override {
    at::Tensor out = std::get<0>(lstm_->forward(embedding_->forward(x.to(at::kLong))));
    return linear_->forward(out.select(1, -1));
  }

 private:
  torch::nn::Embedding embedding_;
  torch::nn::LSTM lstm_;
  torch::nn::Linear linear_;
};

absl::StatusOr<std::unique_ptr<fl::Model>> CreateCharLstm(
    const fedkit::models::CharLstmOptions& options, const fl::Model::CreateArgs& args) {
  fl::ErrorList errors;
  const int64_t embedding_dim = options.has_embedding_dim() ? options.embedding_dim() : 8;
  const int64_t hidden = options.has_hidden() ? options.hidden() : 256;
  const int64_t layers = options.has_layers() ? options.layers() : 2;
  if (embedding_dim < 1) {
    errors.Add("options.embedding_dim", absl::StrCat("must be >= 1, got ", embedding_dim));
  }
  if (hidden < 1) errors.Add("options.hidden", absl::StrCat("must be >= 1, got ", hidden));
  if (layers < 1) errors.Add("options.layers", absl::StrCat("must be >= 1, got ", layers));
  if (args.input_shape.size() != 1 || args.input_shape[0] < 1) {
    errors.Add("input_shape", absl::StrCat("must be {seq_len} of character ids (e.g. {80}), got ",
                                           ShapeString(args.input_shape)));
  }
  CheckNumClasses(args.num_classes, errors);
  FL_RETURN_IF_ERROR(errors.ToStatus());
  return MakeModel<CharLstm>(args.num_classes, embedding_dim, hidden, layers);
}

FL_REGISTER_PLUGIN(fl::Model, "char_lstm", fedkit::models::CharLstmOptions, CreateCharLstm);

}  // namespace
}  // namespace models
