#include "fl/codec.h"

#include <tuple>

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "gtest/gtest.h"

namespace fl {
namespace {

CodecConfig Config(CodecConfig::Kind kind, double fraction = 1.0) { return {kind, fraction}; }

TEST(CodecTest, SparseTernaryByHand) {
  // q = 0.25 of 8: k = 2, threshold |T| >= 2, shared magnitude (3 + 2) / 2.
  const at::Tensor t = at::tensor({0.5f, -2.0f, 1.0f, -1.0f, 3.0f, 0.1f, 1.0f, 0.2f});
  const EncodedTensor e = EncodeTensor(t, Config(CodecConfig::Kind::kSparseTernary, 0.25));
  EXPECT_TRUE(at::equal(e.decoded, at::tensor({0.0f, -2.5f, 0.0f, 0.0f, 2.5f, 0.0f, 0.0f, 0.0f})));
  // 2 positions: min(8 bytes of indices, a 1-byte mask); 2 signs: 1 byte; magnitude: 4.
  EXPECT_EQ(e.bytes, 1 + 1 + 4);
}

TEST(CodecTest, SparseTernaryKeepsEveryTieAtTheThreshold) {
  // q = 0.5 of 4: k = 2, but three entries reach the threshold 1; m = mean(1, 1).
  const at::Tensor t = at::tensor({1.0f, -1.0f, 1.0f, 0.5f});
  const EncodedTensor e = EncodeTensor(t, Config(CodecConfig::Kind::kSparseTernary, 0.5));
  EXPECT_TRUE(at::equal(e.decoded, at::tensor({1.0f, -1.0f, 1.0f, 0.0f})));
  EXPECT_EQ(e.bytes, 1 + 1 + 4);
  // Zeros are never sent, even when the threshold is 0: only the magnitude goes.
  const EncodedTensor zeros = EncodeTensor(at::zeros({6}), Config(CodecConfig::Kind::kSparseTernary, 0.5));
  EXPECT_TRUE(at::equal(zeros.decoded, at::zeros({6})));
  EXPECT_EQ(zeros.bytes, 4);
  // A tensor smaller than 1 / q still sends one entry.
  EXPECT_TRUE(at::equal(EncodeTensor(at::tensor({-3.0f}), Config(CodecConfig::Kind::kSparseTernary, 0.01)).decoded,
                        at::tensor({-3.0f})));
}

TEST(CodecTest, TopKKeepsTheLargestValuesExactly) {
  const at::Tensor t = at::tensor({0.5f, -2.0f, 1.0f, 3.0f});
  const EncodedTensor e = EncodeTensor(t, Config(CodecConfig::Kind::kTopK, 0.5));
  EXPECT_TRUE(at::equal(e.decoded, at::tensor({0.0f, -2.0f, 0.0f, 3.0f})));
  EXPECT_EQ(e.bytes, 1 + 2 * 4);
  // Positions as 4-byte indices when fewer than n / 32 are kept.
  const at::Tensor big = at::arange(1000, at::kFloat);
  EXPECT_EQ(EncodeTensor(big, Config(CodecConfig::Kind::kTopK, 0.01)).bytes, 10 * 4 + 10 * 4);
}

TEST(CodecTest, EightBitLevelsSpanTheTensor) {
  torch::manual_seed(1);
  const at::Tensor t = at::randn({50, 20});
  const EncodedTensor e = EncodeTensor(t, Config(CodecConfig::Kind::kUniform8Bit));
  const double span = (t.max() - t.min()).item<double>();
  EXPECT_LE((e.decoded - t).abs().max().item<double>(), span / 255 / 2 + 1e-6);
  EXPECT_FLOAT_EQ(e.decoded.min().item<float>(), t.min().item<float>());
  EXPECT_EQ(e.bytes, 1000 + 8);
  EXPECT_EQ(e.decoded.sizes(), t.sizes());
}

TEST(CodecTest, IdentityAndIntegerTensorsAreSentAsTheyAre) {
  const at::Tensor t = at::randn({3, 4}, at::kDouble);
  const EncodedTensor e = EncodeTensor(t, Config(CodecConfig::Kind::kIdentity));
  EXPECT_TRUE(at::equal(e.decoded, t));
  EXPECT_EQ(e.bytes, 12 * 8);
  const at::Tensor count = at::tensor({7}, at::kLong);
  const EncodedTensor c = EncodeTensor(count, Config(CodecConfig::Kind::kSparseTernary, 0.1));
  EXPECT_TRUE(at::equal(c.decoded, count));
  EXPECT_EQ(c.bytes, 8);
}

// What the codec's header promises of the decoded `sent`, encoding `total` with
// q = 0.1 of 40 entries (k = 4; random normals have no ties at the threshold).
void ExpectDecodedFollowsTheHeader(CodecConfig::Kind kind, const at::Tensor& total,
                                   const at::Tensor& sent) {
  constexpr int64_t kKept = 4;
  const at::Tensor order = std::get<1>(total.abs().sort(/*stable=*/true, 0, /*descending=*/true));
  const at::Tensor largest = order.narrow(0, 0, kKept);
  const at::Tensor rest = order.narrow(0, kKept, total.numel() - kKept);
  switch (kind) {
    case CodecConfig::Kind::kTopK:
      // The k entries of largest magnitude, each with its own value; nothing else.
      EXPECT_TRUE(at::equal(sent.index_select(0, largest), total.index_select(0, largest)))
          << "top-k sent " << sent.index_select(0, largest) << " for "
          << total.index_select(0, largest);
      EXPECT_TRUE(at::equal(sent.index_select(0, rest), at::zeros({total.numel() - kKept})));
      break;
    case CodecConfig::Kind::kSparseTernary: {
      // Exactly k nonzeros, at the k largest magnitudes, with their signs and one
      // shared magnitude: the mean of the k largest |total|.
      EXPECT_EQ(sent.ne(0).sum().item<int64_t>(), kKept);
      const double magnitude = total.index_select(0, largest).abs().mean().item<double>();
      const at::Tensor kept = sent.index_select(0, largest);
      EXPECT_TRUE(at::allclose(kept.abs(), at::full({kKept}, magnitude), 1e-6, 0))
          << "magnitudes " << kept << ", expected " << magnitude;
      EXPECT_TRUE(at::equal(kept.sign(), total.index_select(0, largest).sign()));
      break;
    }
    case CodecConfig::Kind::kUniform8Bit: {
      // Each entry at most half a level (of 255 over [min, max]) away, the ends on
      // their levels; 1e-6 allows float32's rounding of the levels (entries < 10).
      const double span = (total.max() - total.min()).item<double>();
      EXPECT_LE((sent - total).abs().max().item<double>(), span / 255 / 2 + 1e-6);
      EXPECT_NEAR(sent.min().item<double>(), total.min().item<double>(), 1e-6);
      EXPECT_NEAR(sent.max().item<double>(), total.max().item<double>(), 1e-6);
      break;
    }
    case CodecConfig::Kind::kIdentity:
      ADD_FAILURE() << "not an error-feedback case";
  }
}

TEST(CodecTest, ErrorFeedbackConservesWhatIsSentOverRounds) {
  torch::manual_seed(2);
  for (auto kind : {CodecConfig::Kind::kTopK, CodecConfig::Kind::kSparseTernary,
                    CodecConfig::Kind::kUniform8Bit}) {
    ModelState residual;
    at::Tensor owed = at::zeros({40});  // the residual as this test tracks it
    at::Tensor sent_total = at::zeros({40}), message_total = at::zeros({40});
    for (int round = 0; round < 6; ++round) {
      SCOPED_TRACE(testing::Message() << static_cast<int>(kind) << " round " << round);
      const ModelState message({{"w", at::randn({40}), false}});
      const EncodedState encoded = EncodeWithErrorFeedback(message, Config(kind, 0.1), residual);
      // The residual holds total - decoded by construction, so the conservation
      // below alone would pass an encoder that sends nothing: what is sent must be
      // the codec's encoding of the message plus what was still owed.
      const at::Tensor total = message.tensor(0) + owed;
      ExpectDecodedFollowsTheHeader(kind, total, encoded.decoded.tensor(0));
      owed = total - encoded.decoded.tensor(0);
      sent_total += encoded.decoded.tensor(0);
      message_total += message.tensor(0);
      // Sent so far plus what is still owed equals everything asked to be sent.
      EXPECT_TRUE(at::allclose(sent_total + residual.tensor(0), message_total, 1e-5, 1e-5));
      EXPECT_TRUE(at::allclose(residual.tensor(0), owed, 1e-6, 1e-6));
    }
  }
}

TEST(CodecTest, RejectsAFractionOutsideTheUnitInterval) {
  EXPECT_EQ(CheckCodec(Config(CodecConfig::Kind::kTopK, 0)).message(),
            "fraction: must be in (0, 1], got 0");
  EXPECT_TRUE(CheckCodec(Config(CodecConfig::Kind::kUniform8Bit, 0)).ok());
}

}  // namespace
}  // namespace fl
