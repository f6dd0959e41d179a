#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "data/partitioners/file/file_options.pb.h"
#include "fl/index_files.h"
#include "fl/partitioner.h"
#include "fl/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace data {
namespace {

using ::testing::ElementsAre;

std::string TempPath(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

std::string WriteFile(const std::string& name, const std::string& contents) {
  const std::string path = TempPath(name);
  std::ofstream(path) << contents;
  return path;
}

absl::StatusOr<std::unique_ptr<fl::Partitioner>> Create(const std::string& path) {
  fedkit::data::FilePartitionOptions options;
  options.set_path(path);
  google::protobuf::Any any;
  any.PackFrom(options);
  return fl::Registry<fl::Partitioner>::Global().Create("file", any);
}

// The shares of `json` (written to `name`) for a training set of `n` examples
// over `clients` clients.
absl::StatusOr<std::vector<std::vector<int64_t>>> Partition(const std::string& name,
                                                            const std::string& json, int64_t n,
                                                            int clients) {
  auto partitioner = Create(WriteFile(name, json));
  if (!partitioner.ok()) return partitioner.status();
  const std::vector<int64_t> labels(n, 0);
  std::mt19937_64 rng(1);
  return (*partitioner)->Partition({labels, 1}, clients, rng);
}

// The message of `json`'s failure, with the file's path replaced by "F".
std::string Error(const std::string& json, int64_t n, int clients) {
  auto shares = Partition("bad.json", json, n, clients);
  EXPECT_FALSE(shares.ok());
  std::string message(shares.status().message());
  const std::string path = TempPath("bad.json");
  for (size_t at; (at = message.find(path)) != std::string::npos;) message.replace(at, path.size(), "F");
  return message;
}

TEST(FilePartitionerTest, EachClientGetsItsIndicesInTheFilesOrder) {
  // Not every example need be owned (the official code may leave some out).
  auto shares = Partition("three.json",
                          R"({"num_examples": 10, "clients": [{"indices": [7, 2, 9]},)"
                          R"( {"indices": [0]}, {"indices": ["5", 3]}]})",
                          10, 3);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_THAT(*shares, ElementsAre(ElementsAre(7, 2, 9), ElementsAre(0), ElementsAre(5, 3)));
}

TEST(FilePartitionerTest, WhatPartitionFileJsonWritesReadsBackUnchanged) {
  const std::vector<std::vector<int64_t>> written = {{4, 1}, {0, 5, 2}, {3}};
  auto shares = Partition("written.json", fl::PartitionFileJson(6, written), 6, 3);
  ASSERT_TRUE(shares.ok()) << shares.status();
  EXPECT_EQ(*shares, written);
  EXPECT_EQ(fl::PartitionFileJson(6, written),
            "{\"num_examples\": 6, \"clients\": [\n"
            "{\"indices\": [4, 1]},\n{\"indices\": [0, 5, 2]},\n{\"indices\": [3]}\n]}\n");
}

TEST(FilePartitionerTest, ARelativePathIsRelativeToWhereBazelRunWasStarted) {
  WriteFile("relative.json", R"({"num_examples": 2, "clients": [{"indices": [1, 0]}]})");
  ASSERT_EQ(setenv("BUILD_WORKING_DIRECTORY", std::getenv("TEST_TMPDIR"), 1), 0);
  auto partitioner = Create("relative.json");
  unsetenv("BUILD_WORKING_DIRECTORY");
  ASSERT_TRUE(partitioner.ok()) << partitioner.status();
  const std::vector<int64_t> labels(2, 0);
  std::mt19937_64 rng(1);
  EXPECT_THAT(*(*partitioner)->Partition({labels, 1}, 1, rng), ElementsAre(ElementsAre(1, 0)));
}

TEST(FilePartitionerTest, AMissingOrUnreadableFileFailsWhenTheSpecIsValidated) {
  auto missing = Create(TempPath("nowhere.json"));
  EXPECT_EQ(missing.status().message(),
            absl::StrCat("options.path: cannot read partition file ", TempPath("nowhere.json"),
                         ": No such file or directory"));
  EXPECT_EQ(Create("").status().message(), "options.path: required (the partition file)");
}

TEST(FilePartitionerTest, BadJsonNamesTheFile) {
  auto bad = Create(WriteFile("syntax.json", R"({"num_examples": 3, "clients": [)"));
  EXPECT_THAT(std::string(bad.status().message()),
              ::testing::StartsWith(absl::StrCat("options.path: ", TempPath("syntax.json"),
                                                 ": not a partition file: ")));
  // A misspelt field is an error, not an empty partition.
  auto misspelt = Create(WriteFile("misspelt.json", R"({"num_examples": 3, "client": []})"));
  EXPECT_THAT(std::string(misspelt.status().message()), ::testing::HasSubstr("not a partition file"));
}

TEST(FilePartitionerTest, EachInconsistencyWithTheRunIsNamed) {
  EXPECT_EQ(Error(R"({"num_examples": 9, "clients": [{"indices": [0]}]})", 10, 1),
            "F: num_examples is 9, but the training set has 10 examples");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [0]}]})", 10, 2),
            "F: 1 clients, but partition.num_clients is 2");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [0]}, {"indices": [10]}]})",
                  10, 2),
            "F: client 1: index 10 is outside [0, 10)");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [-1]}]})", 10, 1),
            "F: client 0: index -1 is outside [0, 10)");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [3, 4]}, {"indices": [5, 3]}]})",
                  10, 2),
            "F: client 1: index 3 is also client 0's");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [3, 4, 3]}]})", 10, 1),
            "F: client 0: index 3 appears twice");
  EXPECT_EQ(Error(R"({"num_examples": 10, "clients": [{"indices": [3]}, {}]})", 10, 2),
            "F: client 1 has no examples");
}

}  // namespace
}  // namespace data
