#include "fl/registry.h"

#include <memory>

#include "fl/spec.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A test-only plugin kind; its options reuse spec messages.
class Widget {
 public:
  static constexpr char kRegistryKind[] = "widget";
  struct CreateArgs {
    int scale = 1;
  };
  virtual ~Widget() = default;
  virtual double value() const = 0;
};

class ConstantWidget : public Widget {
 public:
  explicit ConstantWidget(double v) : v_(v) {}
  double value() const override { return v_; }

 private:
  double v_;
};

absl::StatusOr<std::unique_ptr<Widget>> CreateLrWidget(const fedkit::OptimizerSpec& options,
                                                       const Widget::CreateArgs& args) {
  if (options.lr() < 0) return absl::InvalidArgumentError("options.lr: must be >= 0");
  return std::make_unique<ConstantWidget>(options.lr() * args.scale);
}

absl::StatusOr<std::unique_ptr<Widget>> CreateSizeWidget(const fedkit::ProxySpec& options,
                                                         const Widget::CreateArgs& args) {
  return std::make_unique<ConstantWidget>(options.size());
}

FL_REGISTER_PLUGIN(Widget, "lr_widget", fedkit::OptimizerSpec, CreateLrWidget);
FL_REGISTER_PLUGIN(Widget, "size_widget", fedkit::ProxySpec, CreateSizeWidget);

google::protobuf::Any Pack(const google::protobuf::Message& message) {
  google::protobuf::Any any;
  any.PackFrom(message);
  return any;
}

TEST(RegistryTest, ListsNamesSorted) {
  EXPECT_THAT(Registry<Widget>::Global().Names(), ElementsAre("lr_widget", "size_widget"));
}

TEST(RegistryTest, CreatesWithTypedOptionsAndArgs) {
  fedkit::OptimizerSpec options;
  options.set_lr(0.5);
  auto widget = Registry<Widget>::Global().Create("lr_widget", Pack(options), {.scale = 4});
  ASSERT_TRUE(widget.ok()) << widget.status();
  EXPECT_DOUBLE_EQ((*widget)->value(), 2.0);
}

TEST(RegistryTest, EmptyOptionsMeanDefaults) {
  auto widget = Registry<Widget>::Global().Create("size_widget", google::protobuf::Any());
  ASSERT_TRUE(widget.ok()) << widget.status();
  EXPECT_DOUBLE_EQ((*widget)->value(), 0.0);
}

TEST(RegistryTest, UnknownNameListsKnownNames) {
  auto widget = Registry<Widget>::Global().Create("lr_widgte", google::protobuf::Any());
  EXPECT_EQ(widget.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(widget.status().message(),
            "widget \"lr_widgte\" is not registered; known: lr_widget, size_widget");
}

TEST(RegistryTest, WrongOptionsTypeNamesBothTypes) {
  fedkit::ProxySpec wrong;
  wrong.set_size(3);
  auto widget = Registry<Widget>::Global().Create("lr_widget", Pack(wrong));
  EXPECT_EQ(widget.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(widget.status().message(),
            "options: widget \"lr_widget\" takes fedkit.OptimizerSpec, got fedkit.ProxySpec");
}

TEST(RegistryTest, FactoryValidationErrorsPassThrough) {
  fedkit::OptimizerSpec options;
  options.set_lr(-1);
  auto widget = Registry<Widget>::Global().Create("lr_widget", Pack(options));
  EXPECT_THAT(widget.status().message(), HasSubstr("options.lr: must be >= 0"));
}

TEST(RegistryDeathTest, DuplicateNameDiesNamingBothSites) {
  EXPECT_DEATH(Registry<Widget>::Global().Add(
                   {"lr_widget", &registry_internal::DefaultOptions<fedkit::ProxySpec>,
                    &registry_internal::TypedFactory<Widget, fedkit::ProxySpec, CreateSizeWidget>,
                    "elsewhere.cc", 7}),
               "widget \"lr_widget\" registered twice: at fl/registry_test.cc:[0-9]+ and at "
               "elsewhere.cc:7");
}

// A kind of its own, so that entries added at run time do not show in Widget's lists.
class Gadget {
 public:
  static constexpr char kRegistryKind[] = "gadget";
  struct CreateArgs {};
  explicit Gadget(double v) : value(v) {}
  double value;
};

absl::StatusOr<std::unique_ptr<Gadget>> CreateFixedGadget(const fedkit::ProxySpec& options,
                                                          const Gadget::CreateArgs&) {
  return std::make_unique<Gadget>(-1);
}
FL_REGISTER_PLUGIN(Gadget, "fixed_gadget", fedkit::ProxySpec, CreateFixedGadget);

// A closure over `value`, as a Python class is held.
Registry<Gadget>::Entry RunTimeGadget(const std::string& name, double value) {
  return {name, &registry_internal::DefaultOptions<fedkit::ProxySpec>,
          [value](const google::protobuf::Message&, const Gadget::CreateArgs&)
              -> absl::StatusOr<std::unique_ptr<Gadget>> {
            return std::make_unique<Gadget>(value);
          },
          "notebook.py", 3};
}

TEST(RegistryTest, RunTimeEntriesCreateThroughTheirClosureAndReplaceEachOther) {
  Registry<Gadget>& registry = Registry<Gadget>::Global();
  ASSERT_TRUE(registry.AddAtRunTime(RunTimeGadget("python_gadget", 2.5)).ok());
  EXPECT_THAT(registry.Names(), ElementsAre("fixed_gadget", "python_gadget"));
  EXPECT_EQ((*registry.Create("python_gadget", {}))->value, 2.5);
  EXPECT_TRUE(registry.Find("python_gadget")->run_time);
  EXPECT_FALSE(registry.Find("fixed_gadget")->run_time);

  ASSERT_TRUE(registry.AddAtRunTime(RunTimeGadget("python_gadget", 4)).ok());
  EXPECT_EQ((*registry.Create("python_gadget", {}))->value, 4);
}

TEST(RegistryTest, RunTimeEntryCannotTakeAStartUpPluginsName) {
  Registry<Gadget>& registry = Registry<Gadget>::Global();
  absl::Status added = registry.AddAtRunTime(RunTimeGadget("fixed_gadget", 1));
  EXPECT_EQ(added.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(std::string(added.message()),
              ::testing::MatchesRegex("gadget \"fixed_gadget\" is already registered at "
                                      "fl/registry_test.cc:[0-9]+; choose another name"));
  EXPECT_EQ((*registry.Create("fixed_gadget", {}))->value, -1);
}

}  // namespace
}  // namespace fl
