#include <ATen/ATen.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/shakespeare/shakespeare_options.pb.h"
#include "data/test_fixtures.h"
#include "fl/dataset.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::data::fixtures::TestDir;
using ::data::fixtures::WriteFile;

// Ids in LEAF's vocabulary: '\n' 0, ' ' 1, '"' 3, 'A' 25, 'a' 53, 'b' 54, 'z' 78, '}' 79.
constexpr int64_t kNewline = 0, kQuote = 3, kUpperA = 25, kA = 53, kB = 54, kZ = 78, kBrace = 79;

// An 80-character input: `head` (JSON text that decodes to `head_chars` characters)
// then 'a's.
std::string Line(const std::string& head, size_t head_chars) {
  return head + std::string(80 - head_chars, 'a');
}
std::string Line(const std::string& head) { return Line(head, head.size()); }

// One user's JSON entry; x and y are already JSON-escaped.
std::string UserJson(const std::string& name, const std::vector<std::string>& x,
                     const std::vector<std::string>& y) {
  std::string xs, ys;
  for (const std::string& s : x) absl::StrAppend(&xs, xs.empty() ? "" : ", ", "\"", s, "\"");
  for (const std::string& s : y) absl::StrAppend(&ys, ys.empty() ? "" : ", ", "\"", s, "\"");
  return absl::StrCat("\"", name, "\": {\"x\": [", xs, "], \"y\": [", ys, "]}");
}

std::string FileJson(const std::vector<std::string>& users, const std::vector<int>& num_samples,
                     const std::vector<std::string>& user_data) {
  std::string u, n, d;
  for (const std::string& s : users) absl::StrAppend(&u, u.empty() ? "" : ", ", "\"", s, "\"");
  for (int k : num_samples) absl::StrAppend(&n, n.empty() ? "" : ", ", k);
  for (const std::string& s : user_data) absl::StrAppend(&d, d.empty() ? "" : ", ", s);
  return absl::StrCat("{\"users\": [", u, "], \"hierarchies\": [], \"num_samples\": [", n,
                      "], \"user_data\": {", d, "}}");
}

// train/1.json: users "ROMEO" (2 examples) and "BANQUO" (1); train/2.json: "HAMLET"
// (1). test/all.json: one example each of "HAMLET" and "ROMEO". Sorted, the users
// are BANQUO (owner 0), HAMLET (1), ROMEO (2).
std::string MakeFixture(const std::string& name) {
  const std::string dir = TestDir(name);
  TestDir(name + "/train");
  TestDir(name + "/test");
  WriteFile(dir + "/train/1.json",
            FileJson({"ROMEO", "BANQUO"}, {2, 1},
                     {UserJson("ROMEO", {Line("b"), Line("\\n\\\"A", 3)}, {"z", "}"}),
                      UserJson("BANQUO", {Line("bb")}, {"b"})}));
  WriteFile(dir + "/train/2.json",
            FileJson({"HAMLET"}, {1}, {UserJson("HAMLET", {Line("")}, {" "})}));
  WriteFile(dir + "/train/notes.txt", "not JSON, not read");
  WriteFile(dir + "/test/all.json", FileJson({"HAMLET", "ROMEO"}, {1, 1},
                                             {UserJson("HAMLET", {Line("z")}, {"a"}),
                                              UserJson("ROMEO", {Line("")}, {"b"})}));
  return dir;
}

absl::StatusOr<std::unique_ptr<fl::Dataset>> Create(
    const fedkit::data::ShakespeareOptions& options) {
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Dataset>::Global().Create("shakespeare", any);
}

fedkit::data::ShakespeareOptions InDir(const std::string& dir) {
  fedkit::data::ShakespeareOptions options;
  options.set_dir(dir);
  return options;
}

std::string LoadError(const fedkit::data::ShakespeareOptions& options) {
  return std::string((*Create(options))->Load().status().message());
}

std::vector<int64_t> ToVector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return {c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel()};
}

TEST(ShakespeareTest, ReadsUsersInSortedOrderWithOwnerIds) {
  auto dataset = *Create(InDir(MakeFixture("loads")));
  EXPECT_EQ(dataset->info().input_shape, (std::vector<int64_t>{80}));
  EXPECT_EQ(dataset->info().num_classes, 80);
  ASSERT_TRUE(dataset->CheckAvailable().ok());
  auto splits = dataset->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  ASSERT_EQ(splits->train.x.sizes(), (std::vector<int64_t>{4, 80}));
  EXPECT_EQ(splits->train.x.scalar_type(), at::kFloat);
  // BANQUO "bb...", HAMLET "a...", ROMEO "b...", ROMEO "\n\"A...".
  EXPECT_EQ(ToVector(splits->train.x.select(1, 0)), (std::vector<int64_t>{kB, kA, kB, kNewline}));
  EXPECT_EQ(ToVector(splits->train.x.select(1, 1)), (std::vector<int64_t>{kB, kA, kA, kQuote}));
  EXPECT_EQ(ToVector(splits->train.x.select(1, 2)), (std::vector<int64_t>{kA, kA, kA, kUpperA}));
  EXPECT_EQ(ToVector(splits->train.x.select(1, 79)), (std::vector<int64_t>{kA, kA, kA, kA}));
  EXPECT_EQ(ToVector(splits->train.y), (std::vector<int64_t>{kB, 1, kZ, kBrace}));
  EXPECT_EQ(ToVector(splits->train_owners), (std::vector<int64_t>{0, 1, 2, 2}));
  ASSERT_EQ(splits->test.x.sizes(), (std::vector<int64_t>{2, 80}));
  EXPECT_EQ(ToVector(splits->test.x.select(1, 0)), (std::vector<int64_t>{kZ, kA}));
  EXPECT_EQ(ToVector(splits->test.y), (std::vector<int64_t>{kA, kB}));
}

TEST(ShakespeareTest, NaturalPartitionGivesOneClientPerUser) {
  auto splits = (*Create(InDir(MakeFixture("natural"))))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  const std::vector<int64_t> labels = ToVector(splits->train.y);
  const std::vector<int64_t> owners = ToVector(splits->train_owners);
  auto natural = fl::Registry<fl::Partitioner>::Global().Create("natural", google::protobuf::Any());
  ASSERT_TRUE(natural.ok());
  std::mt19937_64 rng(1);
  auto shares = (*natural)->Partition({labels, 80, owners}, 3, rng);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(*shares, (std::vector<std::vector<int64_t>>{{0}, {1}, {2, 3}}));
}

TEST(ShakespeareTest, MaxUsersKeepsTheFirstUsersInBothSplits) {
  fedkit::data::ShakespeareOptions options = InDir(MakeFixture("max_users"));
  options.set_max_users(2);
  auto splits = (*Create(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(ToVector(splits->train_owners), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ToVector(splits->train.y), (std::vector<int64_t>{kB, 1}));
  // Only HAMLET's test example: ROMEO is not among the first two users.
  EXPECT_EQ(ToVector(splits->test.y), (std::vector<int64_t>{kA}));
}

TEST(ShakespeareTest, MissingFilesSayHowToMakeThem) {
  const std::string dir = TestDir("missing");
  TestDir("missing/train");
  WriteFile(dir + "/train/a.json", FileJson({}, {}, {}));
  auto dataset = *Create(InDir(dir));
  const absl::Status status = dataset->CheckAvailable();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(status.message()),
            "dataset (shakespeare): missing " + dir +
                "/test/*.json. Produce LEAF's Shakespeare JSON files with LEAF "
                "(https://github.com/TalwalkarLab/leaf): in leaf/data/shakespeare run "
                "./preprocess.sh -s niid --sf 0.2 -k 0 -t sample -tf 0.8, then copy its "
                "data/train and data/test folders into " +
                dir + " (or set options.dir to leaf/data/shakespeare/data)");
  EXPECT_EQ(dataset->Load().status(), status);
}

TEST(ShakespeareTest, DefaultFolderIsUnderTheDataRoot) {
  setenv("FEDKIT_DATA_DIR", "/data-root", 1);
  auto dataset = *Create(fedkit::data::ShakespeareOptions());
  unsetenv("FEDKIT_DATA_DIR");
  EXPECT_EQ(std::string(dataset->CheckAvailable().message())
                .rfind("dataset (shakespeare): missing /data-root/shakespeare/train/*.json, "
                       "/data-root/shakespeare/test/*.json. ",
                       0),
            0u);
}

TEST(ShakespeareTest, MalformedJsonNamesTheFile) {
  const std::string dir = MakeFixture("malformed");
  WriteFile(dir + "/test/all.json", "{\"users\": [\"ROMEO\"], \"num_samples\": [1,");
  const std::string message = LoadError(InDir(dir));
  EXPECT_EQ(message.rfind(dir + "/test/all.json: not a LEAF JSON file: ", 0), 0u) << message;
}

TEST(ShakespeareTest, InconsistentFilesAreErrorsNamingFileAndUser) {
  const std::string dir = MakeFixture("inconsistent");
  const std::string file = dir + "/train/2.json";
  WriteFile(file, FileJson({"HAMLET"}, {2}, {UserJson("HAMLET", {Line("")}, {" "})}));
  EXPECT_EQ(LoadError(InDir(dir)),
            file + ": user \"HAMLET\": num_samples says 2, user_data has 1 examples");
  WriteFile(file, FileJson({"HAMLET"}, {1, 1}, {UserJson("HAMLET", {Line("")}, {" "})}));
  EXPECT_EQ(LoadError(InDir(dir)), file + ": 1 users but 2 num_samples");
  WriteFile(file, FileJson({"HAMLET"}, {1}, {UserJson("HAMLET", {Line("")}, {" ", "a"})}));
  EXPECT_EQ(LoadError(InDir(dir)), file + ": user \"HAMLET\": 1 x but 2 y");
  WriteFile(file, FileJson({"HAMLET"}, {1}, {UserJson("OTHELLO", {Line("")}, {" "})}));
  EXPECT_EQ(LoadError(InDir(dir)), file + ": user \"HAMLET\": not in user_data");
  WriteFile(file, FileJson({"HAMLET"}, {1},
                           {UserJson("HAMLET", {Line("")}, {" "}),
                            UserJson("OTHELLO", {Line("")}, {" "})}));
  EXPECT_EQ(LoadError(InDir(dir)),
            file + ": user_data has user \"OTHELLO\", which users does not list");
  WriteFile(file, FileJson({"ROMEO"}, {1}, {UserJson("ROMEO", {Line("")}, {" "})}));
  EXPECT_EQ(LoadError(InDir(dir)), file + ": user \"ROMEO\": also in " + dir + "/train/1.json");
}

TEST(ShakespeareTest, WrongLengthsAreErrorsNamingTheExample) {
  const std::string dir = MakeFixture("lengths");
  const std::string file = dir + "/train/2.json";
  WriteFile(file, FileJson({"HAMLET"}, {2},
                           {UserJson("HAMLET", {Line(""), Line("") + "a"}, {" ", " "})}));
  EXPECT_EQ(LoadError(InDir(dir)),
            file + ": user \"HAMLET\" example 1: x has 81 characters, expected 80");
  WriteFile(file, FileJson({"HAMLET"}, {1}, {UserJson("HAMLET", {Line("")}, {"ab"})}));
  EXPECT_EQ(LoadError(InDir(dir)),
            file + ": user \"HAMLET\" example 0: y has 2 characters, expected 1");
}

TEST(ShakespeareTest, UnknownCharactersAreErrorsUnlessMappedToZero) {
  const std::string dir = MakeFixture("unknown");
  const std::string file = dir + "/train/2.json";
  // "é" is two UTF-8 bytes but one character, so the line still has 80.
  WriteFile(file, FileJson({"HAMLET"}, {1}, {UserJson("HAMLET", {Line("b\xC3\xA9", 2)}, {"|"})}));
  fedkit::data::ShakespeareOptions options = InDir(dir);
  EXPECT_EQ(LoadError(options),
            file +
                ": user \"HAMLET\" example 0: x: character \"\xC3\xA9\" is not in LEAF's "
                "80-character vocabulary (set options.map_unknown_to_zero to map it to id 0)");
  options.set_map_unknown_to_zero(true);
  auto splits = (*Create(options))->Load();
  ASSERT_TRUE(splits.ok()) << splits.status();
  EXPECT_EQ(ToVector(splits->train.x[1].slice(0, 0, 4)), (std::vector<int64_t>{kB, 0, kA, kA}));
  EXPECT_EQ(ToVector(splits->train.y)[1], 0);
}

TEST(ShakespeareTest, NegativeMaxUsersIsAnError) {
  fedkit::data::ShakespeareOptions options;
  options.set_max_users(-1);
  EXPECT_EQ(std::string(Create(options).status().message()),
            "options.max_users: must be >= 0, got -1");
}

}  // namespace
}  // namespace data
