#include "models/common/model_args.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace models {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("{", absl::StrJoin(shape, ", "), "}");
}

std::optional<ImageShape> ImageInput(const fl::Model::CreateArgs& args, absl::string_view example,
                                     fl::ErrorList& errors) {
  const std::vector<int64_t>& s = args.input_shape;
  if (s.size() != 3 || s[0] < 1 || s[1] < 1 || s[2] < 1) {
    errors.Add("input_shape", absl::StrCat("must be {channels, height, width} (e.g. ", example,
                                           "), got ", ShapeString(s)));
    return std::nullopt;
  }
  return ImageShape{s[0], s[1], s[2]};
}

void CheckMinImageSize(const ImageShape& image, int64_t min_size, absl::string_view model,
                       absl::string_view example, fl::ErrorList& errors) {
  if (image.height < min_size || image.width < min_size) {
    errors.Add("input_shape",
               absl::StrCat(model, " needs height and width >= ", min_size, " (e.g. ", example,
                            "), got ",
                            ShapeString({image.channels, image.height, image.width})));
  }
}

void CheckNumClasses(int64_t num_classes, fl::ErrorList& errors) {
  if (num_classes < 2) {
    errors.Add("num_classes",
               absl::StrCat("needs a classification dataset (>= 2 classes), got ", num_classes));
  }
}

}  // namespace models
