#ifndef MODELS_COMMON_MODEL_ARGS_H_
#define MODELS_COMMON_MODEL_ARGS_H_

// Checks every model plugin makes on the dataset's shape, with one wording for all
// of them, and the c10::Error boundary around building a network.
//
//   fl::ErrorList errors;
//   std::optional<ImageShape> image = ImageInput(args, "{3, 32, 32}", errors);
//   CheckNumClasses(args.num_classes, errors);
//   FL_RETURN_IF_ERROR(errors.ToStatus());
//   return MakeModel<SimpleCnn>(*image, args.num_classes);

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <c10/util/Exception.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fl/errors.h"
#include "fl/model.h"

namespace models {

struct ImageShape {
  int64_t channels = 0;
  int64_t height = 0;
  int64_t width = 0;
};

// "{1, 28, 28}".
std::string ShapeString(const std::vector<int64_t>& shape);

// args.input_shape as {channels, height, width}; nullopt after adding
// "input_shape: must be {channels, height, width} (e.g. <example>), got <shape>" when
// it is not three positive sizes.
std::optional<ImageShape> ImageInput(const fl::Model::CreateArgs& args, absl::string_view example,
                                     fl::ErrorList& errors);

// Adds "input_shape: <model> needs height and width >= <min_size> (e.g. <example>),
// got <shape>" when the image is smaller than `min_size` on either side.
void CheckMinImageSize(const ImageShape& image, int64_t min_size, absl::string_view model,
                       absl::string_view example, fl::ErrorList& errors);

// Adds "num_classes: needs a classification dataset (>= 2 classes), got <n>" when n < 2.
void CheckNumClasses(int64_t num_classes, fl::ErrorList& errors);

// Builds the network; LibTorch reports a bad layer configuration by throwing, which
// becomes an InternalError here (validation should have caught it first).
template <typename M, typename... Args>
absl::StatusOr<std::unique_ptr<fl::Model>> MakeModel(Args&&... args) {
  try {
    return std::unique_ptr<fl::Model>(std::make_unique<M>(std::forward<Args>(args)...));
  } catch (const c10::Error& e) {
    return absl::InternalError(e.what_without_backtrace());
  }
}

}  // namespace models

#endif  // MODELS_COMMON_MODEL_ARGS_H_
