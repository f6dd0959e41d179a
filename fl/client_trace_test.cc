#include "fl/client_trace.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace fl {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(ClientTraceTest, ParsesColumnsInAnyOrderWithEmptyCells) {
  absl::StatusOr<ClientTrace> trace = ClientTrace::Parse(
      "# devices\n"
      "available,speed,client,upload_bytes_per_second\r\n"
      "10-20 30-inf,2.5,1,\n"
      ",,0,1000\n",
      "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  ASSERT_EQ(trace->num_devices(), 2);
  const ClientTrace::Device& zero = trace->ForClient(0);
  EXPECT_FALSE(zero.speed.has_value());
  EXPECT_EQ(zero.upload_bytes_per_second, 1000.0);
  EXPECT_FALSE(zero.download_bytes_per_second.has_value());
  EXPECT_TRUE(zero.available.empty());
  const ClientTrace::Device& one = trace->ForClient(1);
  EXPECT_EQ(one.speed, 2.5);
  EXPECT_FALSE(one.upload_bytes_per_second.has_value());
  ASSERT_EQ(one.available.size(), 2u);
  EXPECT_EQ(one.available[0].start, 10);
  EXPECT_EQ(one.available[0].end, 20);
  EXPECT_EQ(one.available[1].start, 30);
  EXPECT_EQ(one.available[1].end, kInf);
}

TEST(ClientTraceTest, ClientsCycleOverTheDevices) {
  absl::StatusOr<ClientTrace> trace =
      ClientTrace::Parse("client,speed\n0,1\n1,2\n2,3\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  EXPECT_EQ(trace->ForClient(4).speed, 2.0);
  EXPECT_EQ(trace->ForClient(6).speed, 1.0);
}

TEST(ClientTraceTest, NextWindowIsTheFirstThatEndsAfterTheTime) {
  absl::StatusOr<ClientTrace> trace =
      ClientTrace::Parse("client,available\n0,10-20 30-40\n1,\n", "t.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  auto window = [&](int64_t client, double at) {
    const OnlineWindow w = trace->NextWindow(client, at);
    return std::make_pair(w.start, w.end);
  };
  EXPECT_EQ(window(0, 0), std::make_pair(10.0, 20.0));   // offline until 10
  EXPECT_EQ(window(0, 10), std::make_pair(10.0, 20.0));  // online from 10
  EXPECT_EQ(window(0, 19.5), std::make_pair(10.0, 20.0));
  EXPECT_EQ(window(0, 20), std::make_pair(30.0, 40.0));  // the end is excluded
  EXPECT_EQ(window(0, 40), std::make_pair(kInf, kInf));  // never again
  EXPECT_EQ(window(1, 1e9), std::make_pair(0.0, kInf));  // always online
}

TEST(ClientTraceTest, ErrorsNameTheFileLineAndColumn) {
  auto error = [](absl::string_view csv) {
    absl::StatusOr<ClientTrace> trace = ClientTrace::Parse(csv, "t.csv");
    EXPECT_FALSE(trace.ok());
    return std::string(trace.status().message());
  };
  EXPECT_THAT(error("speed\n1\n"), HasSubstr("t.csv:1: the header has no \"client\" column"));
  EXPECT_THAT(error("client,sped\n0,1\n"), HasSubstr("t.csv:1: unknown column \"sped\""));
  EXPECT_THAT(error("client,client\n0,0\n"), HasSubstr("column \"client\" appears twice"));
  EXPECT_THAT(error("client,speed\n0\n"), HasSubstr("t.csv:2: 1 cells, the header has 2"));
  EXPECT_THAT(error("client,speed\n0,-1\n"), HasSubstr("t.csv:2: speed: \"-1\" is not a finite"));
  EXPECT_THAT(error("client,speed\n0,inf\n"), HasSubstr("t.csv:2: speed: \"inf\""));
  EXPECT_THAT(error("client,speed\nx,1\n"), HasSubstr("t.csv:2: client: \"x\" is not an id"));
  EXPECT_THAT(error("client\n0\n0\n"), HasSubstr("t.csv:3: client: device 0 has a row already"));
  EXPECT_THAT(error("client\n0\n2\n"), HasSubstr("t.csv: no row for device 1"));
  EXPECT_THAT(error("client\n"), HasSubstr("t.csv: no devices"));
  EXPECT_THAT(error("client,available\n0,5-5\n"),
              HasSubstr("t.csv:2: available: window \"5-5\" is not \"start-end\""));
  EXPECT_THAT(error("client,available\n0,inf-9\n"), HasSubstr("window \"inf-9\""));
  EXPECT_THAT(error("client,available\n0,1-9 8-10\n"),
              HasSubstr("window \"8-10\" does not start after the previous one ends (9)"));
  EXPECT_THAT(error("client,available\n0,1-9 9-10\n"), HasSubstr("window \"9-10\" does not start"));
  EXPECT_THAT(error("client,available\n0,1-9 x\n"), HasSubstr("window \"x\""));
}

TEST(ClientTraceTest, LoadNamesAMissingFile) {
  absl::StatusOr<ClientTrace> trace = ClientTrace::Load("/nonexistent/trace.csv");
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(trace.status().message(), HasSubstr("client trace /nonexistent/trace.csv"));
}

}  // namespace
}  // namespace fl
