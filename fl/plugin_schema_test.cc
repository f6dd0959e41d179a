#include "fl/plugin_schema.h"

#include "fl/plugin_schema_test.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

TEST(PluginSchemaTest, DescribesEveryFieldWithTypeDefaultAndComment) {
  fedkit::test::ToyOptions defaults;
  defaults.set_every(5);  // a default the plugin's instance carries
  const fedkit::PluginSchema schema = DescribePlugin("toy", defaults);
  EXPECT_EQ(schema.name(), "toy");
  EXPECT_EQ(schema.options_type(), "fedkit.test.ToyOptions");
  EXPECT_EQ(schema.comment(), "A toy plugin's options.");
  ASSERT_EQ(schema.fields_size(), 7);

  const fedkit::FieldSchema& lr = schema.fields(0);
  EXPECT_EQ(lr.name(), "lr");
  EXPECT_EQ(lr.type(), "double");
  EXPECT_TRUE(lr.has_presence());
  EXPECT_EQ(lr.default_value(), "");  // unset: the plugin's choice, in the comment
  EXPECT_EQ(lr.comment(), "The server's step size. Default 1.");

  EXPECT_EQ(schema.fields(1).default_value(), "5");
  EXPECT_FALSE(schema.fields(1).has_presence());

  const fedkit::FieldSchema& mode = schema.fields(2);
  EXPECT_EQ(mode.type(), "enum fedkit.test.ToyOptions.Mode");
  EXPECT_EQ(mode.comment(), "How it runs.");  // from the enum's declaration
  EXPECT_EQ(mode.default_value(), "PLAIN");
  ASSERT_EQ(mode.enum_values_size(), 2);
  EXPECT_EQ(mode.enum_values(0).comment(), "The mode unless one is named.");
  EXPECT_EQ(mode.enum_values(1).comment(), "Skips the checks.");

  EXPECT_TRUE(schema.fields(3).repeated());
  EXPECT_EQ(schema.fields(3).type(), "string");
  EXPECT_EQ(schema.fields(4).type(), "map<string, double>");
  EXPECT_FALSE(schema.fields(4).repeated());

  const fedkit::FieldSchema& inner = schema.fields(5);
  EXPECT_EQ(inner.type(), "message fedkit.test.ToyOptions.Inner");
  ASSERT_EQ(inner.fields_size(), 2);
  EXPECT_EQ(inner.fields(0).comment(), "How deep.");
  // ToyOptions is being described already: named, not expanded again.
  EXPECT_EQ(inner.fields(1).type(), "message fedkit.test.ToyOptions");
  EXPECT_EQ(inner.fields(1).fields_size(), 0);

  EXPECT_EQ(schema.fields(6).comment(), "A trailing comment.");
  EXPECT_EQ(schema.fields(6).default_value(), "false");
}

TEST(PluginSchemaTest, FormatsTheCatalogForReading) {
  fedkit::PluginCatalog catalog;
  fedkit::PluginKindSchema& kind = *catalog.add_kinds();
  kind.set_kind("aggregator");
  *kind.add_plugins() = DescribePlugin("toy", fedkit::test::ToyOptions());
  catalog.add_kinds()->set_kind("model");
  EXPECT_EQ(FormatCatalog(catalog),
            "aggregator:\n"
            "  toy                  fedkit.test.ToyOptions\n"
            "      lr: optional double\n"
            "          The server's step size. Default 1.\n"
            "      every: int32 = 0\n"
            "          Rounds between two evaluations.\n"
            "      mode: enum fedkit.test.ToyOptions.Mode = PLAIN\n"
            "          How it runs.\n"
            "          values:\n"
            "            PLAIN: The mode unless one is named.\n"
            "            FAST: Skips the checks.\n"
            "      names: repeated string\n"
            "      weights: map<string, double>\n"
            "      inner: message fedkit.test.ToyOptions.Inner\n"
            "        depth: int32 = 0\n"
            "            How deep.\n"
            "        again: repeated message fedkit.test.ToyOptions\n"
            "            A list of more of the same.\n"
            "      flag: bool = false\n"
            "          A trailing comment.\n"
            "model:\n"
            "  (none)\n");
}

TEST(PluginSchemaTest, JsonReadsBackIntoTheSameCatalog) {
  fedkit::PluginCatalog catalog;
  fedkit::PluginKindSchema& kind = *catalog.add_kinds();
  kind.set_kind("aggregator");
  *kind.add_plugins() = DescribePlugin("toy", fedkit::test::ToyOptions());
  fedkit::PluginCatalog parsed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(CatalogJson(catalog), &parsed).ok());
  EXPECT_EQ(parsed.SerializeAsString(), catalog.SerializeAsString());
  EXPECT_NE(CatalogJson(catalog).find("\"default_value\": \"PLAIN\""), std::string::npos);
}

}  // namespace
}  // namespace fl
