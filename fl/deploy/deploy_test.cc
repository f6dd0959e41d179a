// Server and clients over gRPC with TLS on 127.0.0.1, in one process: the run
// equals the in-process simulation bit for bit, and what the protocol forbids is
// refused and counted.

#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "fl/deploy/client_session.h"
#include "fl/deploy/client_state_history.h"
#include "fl/deploy/coordinator.h"
#include "fl/deploy/remote_client.h"
#include "fl/deploy/tls.h"
#include "fl/server.h"
#include "fl/wire.h"
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"

namespace fl::deploy {
namespace {

using fedkit::deploy::ClientMessage;
using fedkit::deploy::ServerMessage;
using ::testing::HasSubstr;

std::string Testdata(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/fedkit/fl/deploy/testdata/", name);
}

ModelState Zero() { return ModelState({{"w", at::zeros({3}), false}}); }

// Deterministic and stateful: its delta depends on the model, the round and how
// many of its updates were accepted so far (state kept only on an accepted
// verdict, like a hook's), so lost or doubled verdicts change the run.
class StatefulClient : public Client {
 public:
  explicit StatefulClient(int64_t id, int hang_in_round = 0) : id_(id), hang_(hang_in_round) {}
  int64_t id() const override { return id_; }
  int64_t num_examples() const override { return 10 + id_; }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override {
    if (round == hang_) std::this_thread::sleep_for(std::chrono::seconds(5));
    ClientUpdate update;
    update.client_id = id_;
    update.delta = global.Clone();
    update.delta.mutable_tensor(0).mul_(-0.5).add_(0.1 * id_ + 0.01 * round + accepted_);
    update.num_examples = num_examples();
    update.local_steps = update.planned_steps = 2;
    update.bytes_sent = 12;
    update.metrics["train_loss"] = 1.0 / (round + id_);
    return update;
  }
  void Acknowledge(bool accepted) override { accepted_ += accepted; }

 private:
  int64_t id_;
  int hang_;
  int accepted_ = 0;
};

class Mean : public Aggregator {
 public:
  absl::Status Accumulate(ClientUpdate update, ServerContext&) override {
    if (!sum_) sum_ = update.delta.ZerosLike();
    sum_->Axpy(static_cast<double>(update.num_examples), update.delta);
    n_ += update.num_examples;
    return absl::OkStatus();
  }
  absl::StatusOr<ModelState> Finalize(const ModelState& global, ServerContext&) override {
    ModelState next = global.Clone();
    next.Axpy(1.0 / n_, *sum_);
    sum_.reset();
    n_ = 0;
    return next;
  }

 private:
  std::optional<ModelState> sum_;
  int64_t n_ = 0;
};

struct RunOutput {
  ModelState model;
  std::vector<MetricsRow> rows;
};

RunOutput RunServer(std::vector<std::unique_ptr<Client>> clients, const std::string& name,
                    int workers) {
  Mean aggregator;
  auto sink = MetricsSink::Open(absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name),
                                fedkit::ExperimentSpec());
  EXPECT_TRUE(sink.ok());
  ServerConfig config{.rounds = 3, .clients_per_round = 3, .workers = workers, .seed = 4};
  Server server(config, &aggregator, std::move(clients), ServerContext(),
                [](const ModelState& state) -> absl::StatusOr<Evaluation> {
                  return Evaluation{state.tensor(0)[0].item<double>(), 0.0, 1};
                },
                sink->get());
  absl::StatusOr<ModelState> model = server.Run(Zero());
  EXPECT_TRUE(model.ok()) << model.status();
  return {model.ok() ? *model : ModelState(), (*sink)->rows()};
}

// One round of every client, each on its own worker; its metrics row.
absl::StatusOr<MetricsRow> RunOneRound(std::vector<std::unique_ptr<Client>> clients,
                                       const std::string& name) {
  Mean aggregator;
  auto sink = MetricsSink::Open(absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name),
                                fedkit::ExperimentSpec());
  if (!sink.ok()) return sink.status();
  const int n = static_cast<int>(clients.size());
  ServerConfig config{.rounds = 1, .clients_per_round = n, .workers = n};
  Server server(config, &aggregator, std::move(clients), ServerContext(),
                [](const ModelState&) -> absl::StatusOr<Evaluation> { return Evaluation{}; },
                sink->get());
  if (absl::StatusOr<ModelState> model = server.Run(Zero()); !model.ok()) return model.status();
  return (*sink)->rows().at(0);
}

// A coordinator serving on 127.0.0.1 with TLS, and sessions of clients.
class Deployment {
 public:
  explicit Deployment(CoordinatorOptions options, bool mutual_tls = false)
      : coordinator_(std::move(options)) {
    TlsFiles files{Testdata("server.pem"), Testdata("server.key"),
                   mutual_tls ? Testdata("ca.pem") : ""};
    absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerTls(files);
    CHECK(credentials.ok()) << credentials.status();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", *credentials, &port_);
    builder.RegisterService(&coordinator_);
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.limits.max_message_bytes));
    server_ = builder.BuildAndStart();
    CHECK(server_ != nullptr && port_ > 0);
  }
  ~Deployment() {
    coordinator_.EndSessions("the run is over");
    for (std::thread& t : sessions_) t.join();
    server_->Shutdown();
  }
  Coordinator& coordinator() { return coordinator_; }

  // `max_message`: the largest message the client side receives.
  std::shared_ptr<grpc::Channel> Channel(bool client_cert = false,
                                         int64_t max_message = int64_t{4} << 20) {
    TlsFiles files{client_cert ? Testdata("client.pem") : "",
                   client_cert ? Testdata("client.key") : "", Testdata("ca.pem")};
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials = ClientTls(files);
    CHECK(credentials.ok()) << credentials.status();
    return ChannelWith(*credentials, max_message);
  }

  std::shared_ptr<grpc::Channel> ChannelWith(
      const std::shared_ptr<grpc::ChannelCredentials>& credentials,
      int64_t max_message = int64_t{4} << 20) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(static_cast<int>(max_message));
    return grpc::CreateCustomChannel(absl::StrCat("localhost:", port_), credentials, args);
  }

  // Runs client `client`'s session on a thread; its result lands in `result`.
  void Start(std::unique_ptr<Client> client, ClientSessionOptions options,
             absl::StatusOr<std::string>* result, bool client_cert = false) {
    StartOn(Channel(client_cert), std::move(client), options, result);
  }

  void StartOn(std::shared_ptr<grpc::Channel> channel, std::unique_ptr<Client> client,
               ClientSessionOptions options, absl::StatusOr<std::string>* result) {
    sessions_.emplace_back([channel, client = std::move(client), options, result] {
      *result = RunClientSession(channel, *client, Zero(), options);
    });
  }

 private:
  Coordinator coordinator_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::vector<std::thread> sessions_;
};

CoordinatorOptions Options(int clients) {
  CoordinatorOptions options;
  for (int k = 0; k < clients; ++k) options.tokens[k] = absl::StrCat("token-", k);
  options.spec_digest = "digest";
  options.connect_timeout = absl::Seconds(20);
  return options;
}

ClientSessionOptions SessionOptions(int64_t id) {
  ClientSessionOptions options;
  options.client_id = id;
  options.token = absl::StrCat("token-", id);
  options.spec_digest = "digest";
  return options;
}

TEST(DeployTest, ARunOverTlsEqualsTheInProcessRunBitForBit) {
  std::vector<std::unique_ptr<Client>> local;
  for (int k = 0; k < 4; ++k) local.push_back(std::make_unique<StatefulClient>(k));
  const RunOutput expected = RunServer(std::move(local), "local", 1);

  std::vector<absl::StatusOr<std::string>> results(4);
  RunOutput deployed;
  {
    Deployment deployment(Options(4), /*mutual_tls=*/true);
    std::vector<std::unique_ptr<Client>> remote;
    for (int k = 0; k < 4; ++k) {
      deployment.Start(std::make_unique<StatefulClient>(k), SessionOptions(k), &results[k],
                       /*client_cert=*/true);
      remote.push_back(std::make_unique<RemoteClient>(k, 10 + k, &deployment.coordinator(),
                                                      absl::Seconds(20), at::kCPU));
    }
    deployed = RunServer(std::move(remote), "deployed", 3);
    EXPECT_TRUE(deployment.coordinator().refusals().empty());
  }
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE(results[k].ok()) << results[k].status();
    EXPECT_EQ(*results[k], "the run is over");
  }
  ASSERT_EQ(deployed.rows.size(), expected.rows.size());
  for (size_t r = 0; r < expected.rows.size(); ++r) {
    EXPECT_EQ(deployed.rows[r].test_accuracy, expected.rows[r].test_accuracy) << r;
    EXPECT_EQ(deployed.rows[r].train_loss, expected.rows[r].train_loss) << r;
    EXPECT_EQ(deployed.rows[r].clients, expected.rows[r].clients) << r;
    EXPECT_EQ(deployed.rows[r].bytes_up, expected.rows[r].bytes_up) << r;
  }
  EXPECT_TRUE(deployed.model.tensor(0).equal(expected.model.tensor(0)));
}

TEST(DeployTest, WrongCredentialsAndSpecsAreRefusedAndCounted) {
  CoordinatorOptions options = Options(2);
  options.connect_timeout = absl::Milliseconds(300);
  Deployment deployment(options);
  absl::StatusOr<std::string> token, unknown, spec;
  ClientSessionOptions bad_token = SessionOptions(0);
  bad_token.token = "token-1";
  ClientSessionOptions bad_id = SessionOptions(5);
  ClientSessionOptions bad_spec = SessionOptions(1);
  bad_spec.spec_digest = "another";
  deployment.Start(std::make_unique<StatefulClient>(0), bad_token, &token);
  deployment.Start(std::make_unique<StatefulClient>(5), bad_id, &unknown);
  deployment.Start(std::make_unique<StatefulClient>(1), bad_spec, &spec);
  // The sessions end on their own; the destructor joins them.
  for (int i = 0; i < 200 && deployment.coordinator().refusals().size() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(deployment.coordinator().refusals(),
            (std::map<std::string, int>{{"spec", 1}, {"token", 1}, {"unknown_client", 1}}));
  absl::StatusOr<std::string> unreached = deployment.coordinator().RunTask(
      0, 1, "x", absl::Seconds(1));
  EXPECT_EQ(unreached.status().code(), absl::StatusCode::kUnavailable);
}

TEST(DeployTest, AHungClientMissesTheDeadlineAndTheRoundGoesOn) {
  std::vector<absl::StatusOr<std::string>> results(3);
  Deployment deployment(Options(3));
  std::vector<std::unique_ptr<Client>> remote;
  for (int k = 0; k < 3; ++k) {
    deployment.Start(std::make_unique<StatefulClient>(k, k == 2 ? 1 : 0), SessionOptions(k),
                     &results[k]);
    remote.push_back(std::make_unique<RemoteClient>(k, 10 + k, &deployment.coordinator(),
                                                    absl::Seconds(2), at::kCPU));
  }
  absl::StatusOr<MetricsRow> row = RunOneRound(std::move(remote), "hung");
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->clients, 2);
  EXPECT_EQ(row->rejected_by_reason.at("training"), 1);
  EXPECT_EQ(deployment.coordinator().refusals().at("deadline"), 1);
}

// A client that speaks the protocol by hand: hello, then what the test sends.
class RawSession {
 public:
  RawSession(Deployment& deployment, int64_t id)
      : stub_(fedkit::deploy::Coordinator::NewStub(deployment.Channel())) {
    stream_ = stub_->Session(&context_);
    ClientMessage hello;
    hello.mutable_hello()->set_client_id(id);
    hello.mutable_hello()->set_token(absl::StrCat("token-", id));
    hello.mutable_hello()->set_spec_digest("digest");
    CHECK(stream_->Write(hello));
    ServerMessage welcome;
    CHECK(stream_->Read(&welcome) && welcome.has_welcome());
  }
  ~RawSession() {
    context_.TryCancel();
    stream_->Finish();
  }
  // Reads a task and its payload; returns the task id.
  uint64_t ReadTask() {
    ServerMessage message;
    CHECK(stream_->Read(&message) && message.has_task());
    const uint64_t task = message.task().task_id();
    int64_t left = message.task().payload_bytes();
    while (left > 0) {
      CHECK(stream_->Read(&message) && message.has_chunk());
      left -= static_cast<int64_t>(message.chunk().data().size());
    }
    return task;
  }
  void Answer(uint64_t task, int64_t declared, const std::string& payload) {
    ClientMessage header;
    header.mutable_result()->set_task_id(task);
    header.mutable_result()->set_payload_bytes(declared);
    stream_->Write(header);
    if (!payload.empty()) {
      ClientMessage chunk;
      chunk.mutable_chunk()->set_data(payload);
      stream_->Write(chunk);
    }
  }
  // The verdict's accepted (1 or 0), or -1 when the session ends first.
  int ReadVerdict() {
    ServerMessage message;
    while (stream_->Read(&message)) {
      if (message.has_verdict()) return message.verdict().accepted();
    }
    return -1;
  }
  std::string ReadGoodbye() {
    ServerMessage message;
    while (stream_->Read(&message)) {
      if (message.has_goodbye()) return message.goodbye().reason();
    }
    return "";
  }

 private:
  std::unique_ptr<fedkit::deploy::Coordinator::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<ClientMessage, ServerMessage>> stream_;
};

std::string AnUpdate(int64_t id) {
  ClientUpdate update;
  update.client_id = id;
  update.delta = Zero();
  update.num_examples = 1;
  std::vector<IndexedUpdate> outcome;
  outcome.push_back({0, update});
  return SerializeUpdates(outcome);
}

TEST(DeployTest, AReplayedAnswerIsRefusedAndEndsTheSession) {
  Deployment deployment(Options(1));
  RawSession raw(deployment, 0);
  absl::StatusOr<std::string> first;
  std::thread server([&] { first = deployment.coordinator().RunTask(0, 1, "task", absl::Seconds(10)); });
  const uint64_t task = raw.ReadTask();
  raw.Answer(task, static_cast<int64_t>(AnUpdate(0).size()), AnUpdate(0));
  server.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, AnUpdate(0));
  raw.Answer(task, static_cast<int64_t>(AnUpdate(0).size()), AnUpdate(0));  // again
  EXPECT_THAT(raw.ReadGoodbye(), HasSubstr("refused: an answer to task 1, which it has answered"));
  EXPECT_EQ(deployment.coordinator().refusals().at("replay"), 1);
}

TEST(DeployTest, AnOversizeAnswerIsRefusedBeforeItArrives) {
  CoordinatorOptions options = Options(1);
  options.limits.max_payload_bytes = 1000;
  Deployment deployment(options);
  RawSession raw(deployment, 0);
  absl::StatusOr<std::string> answer;
  std::thread server([&] { answer = deployment.coordinator().RunTask(0, 1, "task", absl::Seconds(10)); });
  raw.Answer(raw.ReadTask(), int64_t{1} << 40, "");
  server.join();
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answer.status().message(),
              HasSubstr("declared size 1099511627776 bytes exceeds the limit of 1000"));
  EXPECT_EQ(deployment.coordinator().refusals().at("oversize"), 1);
}

TEST(DeployTest, AWrongShapeUpdateIsRejectedCountedAndTheRoundGoesOn) {
  Deployment deployment(Options(2));
  absl::StatusOr<std::string> honest;
  deployment.Start(std::make_unique<StatefulClient>(0), SessionOptions(0), &honest);
  RawSession liar(deployment, 1);
  std::thread answer([&] {
    ClientUpdate update;
    update.client_id = 1;
    update.delta = ModelState({{"w", at::zeros({4}), false}});  // the model's w has 3
    update.num_examples = 1;
    std::vector<IndexedUpdate> outcome;
    outcome.push_back({0, update});
    const std::string payload = SerializeUpdates(outcome);
    liar.Answer(liar.ReadTask(), static_cast<int64_t>(payload.size()), payload);
  });
  std::vector<std::unique_ptr<Client>> remote;
  for (int k = 0; k < 2; ++k) {
    remote.push_back(std::make_unique<RemoteClient>(k, 10 + k, &deployment.coordinator(),
                                                    absl::Seconds(20), at::kCPU));
  }
  absl::StatusOr<MetricsRow> row = RunOneRound(std::move(remote), "wrong_shape");
  answer.join();
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(row->clients, 1);
  EXPECT_EQ(row->rejected_by_reason.at("shape"), 1);
  EXPECT_EQ(liar.ReadVerdict(), 0);  // told it was rejected
}

// Keeps its state in a ClientStateStore, as hooks do: each accepted round's
// update depends on the state the rounds before it left.
class StoreClient : public Client {
 public:
  int64_t id() const override { return 0; }
  int64_t num_examples() const override { return 1; }
  absl::StatusOr<ClientUpdate> Train(const ModelState& global, const RoundPlan& plan,
                                     int round) override {
    const TensorMap state = store.Checkout(0, "h");
    const float c = state.empty() ? 0.0f : state.at("c").item<float>();
    ClientUpdate update;
    update.client_id = 0;
    update.delta = ModelState({{"w", at::full({3}, c + round), false}});
    update.num_examples = 1;
    store.Stage(0, {{"h", {{"c", at::full({}, 2 * c + round)}}}});
    return update;
  }
  void Acknowledge(bool accepted) override { accepted ? store.Commit(0) : store.Discard(0); }
  ClientStateStore store;
};

TEST(DeployTest, AClientGoesBackToItsStateAtTheCheckpointTheServerResumedFrom) {
  const std::string dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/history");
  StoreClient client;
  auto history = ClientStateHistory::Open(dir, 0, "digest", at::kCPU, &client.store);
  ASSERT_TRUE(history.ok()) << history.status();
  ClientSessionOptions session = SessionOptions(0);
  session.history = history->get();
  // Trains `rounds` against a server that resumed after `resumed`; the deltas' values.
  auto serve = [&](std::vector<int> rounds, int resumed) {
    CoordinatorOptions options = Options(1);
    options.checkpoint_every = 2;
    options.resumed_after_round = resumed;
    Deployment deployment(options);
    absl::StatusOr<std::string> ended;
    std::thread process([&] { ended = RunClientSession(deployment.Channel(), client, Zero(), session); });
    RemoteClient remote(0, 1, &deployment.coordinator(), absl::Seconds(20), at::kCPU);
    std::vector<float> deltas;
    for (int round : rounds) {
      absl::StatusOr<ClientUpdate> update = remote.Train(Zero(), RoundPlan(), round);
      EXPECT_TRUE(update.ok()) << update.status();
      deltas.push_back(update.ok() ? update->delta.tensor(0)[0].item<float>() : -1.0f);
      remote.Acknowledge(true);
    }
    deployment.coordinator().EndSessions("the run is over");
    process.join();
    EXPECT_TRUE(ended.ok()) << ended.status();
    return deltas;
  };
  // c: 0 -> 1 -> 4 -> 11 -> 26; each delta is c + round. The checkpoint after
  // round 2 makes round 1's state useless.
  EXPECT_EQ(serve({1, 2, 3, 4}, 0), (std::vector<float>{1, 3, 7, 15}));
  EXPECT_THAT(history->get()->rounds(), ::testing::ElementsAre(2, 3, 4));
  // The server crashed before its checkpoint after round 4 and resumed from the
  // one after round 2: without going back, round 3's delta would be 26 + 3.
  EXPECT_EQ(serve({3, 4}, 2), (std::vector<float>{7, 15}));
  EXPECT_THAT(history->get()->rounds(), ::testing::ElementsAre(2, 3, 4));
}

TEST(DeployTest, AVerdictLostWithTheConnectionArrivesWithTheNextTask) {
  StoreClient client;
  SessionCarry carry;
  ClientSessionOptions session = SessionOptions(0);
  session.carry = &carry;
  Deployment deployment(Options(1));
  RemoteClient remote(0, 1, &deployment.coordinator(), absl::Seconds(20), at::kCPU);
  absl::StatusOr<std::string> first, second;
  std::thread one([&] { first = RunClientSession(deployment.Channel(), client, Zero(), session); });
  ASSERT_TRUE(remote.Train(Zero(), RoundPlan(), 1).ok());  // stages c = 1
  deployment.coordinator().EndSessions("stopping", /*will_resume=*/true);
  one.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable) << first.status();
  EXPECT_EQ(carry.awaited_task, 1u);
  remote.Acknowledge(true);  // the client is away: the verdict waits for its next task
  std::thread two([&] { second = RunClientSession(deployment.Channel(), client, Zero(), session); });
  absl::StatusOr<ClientUpdate> next = remote.Train(Zero(), RoundPlan(), 2);
  ASSERT_TRUE(next.ok()) << next.status();
  // c = 1 was kept: 1 + 2 (a lost verdict, taken as a rejection, would give 0 + 2).
  EXPECT_EQ(next->delta.tensor(0)[0].item<float>(), 3.0f);
  deployment.coordinator().EndSessions("the run is over");
  two.join();
  EXPECT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(carry.welcomed, 2);
}

TEST(DeployTest, EachSideSendsChunksThatFitTheOthersMessageLimit) {
  CoordinatorOptions options = Options(1);
  options.limits.max_message_bytes = kMinMessageBytes;
  Deployment deployment(options);
  const ModelState big({{"w", at::zeros({100000}), false}});  // 400 kB each way
  StatefulClient client(0);
  ClientSessionOptions session = SessionOptions(0);
  session.limits.max_message_bytes = kMinMessageBytes;
  absl::StatusOr<std::string> ended;
  std::thread process([&] {
    ended = RunClientSession(deployment.Channel(false, kMinMessageBytes), client, big, session);
  });
  RemoteClient remote(0, 10, &deployment.coordinator(), absl::Seconds(20), at::kCPU);
  absl::StatusOr<ClientUpdate> update = remote.Train(big, RoundPlan(), 1);
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_EQ(update->delta.tensor(0).numel(), 100000);
  deployment.coordinator().EndSessions("the run is over");
  process.join();
  EXPECT_TRUE(ended.ok()) << ended.status();
  // The hello, then the answer's header and at least 400 kB / 63 kB chunks.
  EXPECT_GE(deployment.coordinator().traffic().messages_received, 1 + 1 + 7);
}

TEST(DeployTest, AClientWithoutACertificateIsRefusedUnderMutualTls) {
  CoordinatorOptions options = Options(1);
  options.connect_timeout = absl::Seconds(2);
  Deployment deployment(options, /*mutual_tls=*/true);
  absl::StatusOr<std::string> result;
  deployment.Start(std::make_unique<StatefulClient>(0), SessionOptions(0), &result,
                   /*client_cert=*/false);
  absl::StatusOr<std::string> answer =
      deployment.coordinator().RunTask(0, 1, "task", absl::Seconds(1));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answer.status().message(), HasSubstr("client 0 is not connected"));
}

// A client that must not get in: the server asks it for a task and finds nobody
// connected, and the client's session ends with an error.
void ExpectRefused(Deployment& deployment, std::shared_ptr<grpc::Channel> channel) {
  absl::StatusOr<std::string> result;
  deployment.StartOn(std::move(channel), std::make_unique<StatefulClient>(0), SessionOptions(0),
                     &result);
  absl::StatusOr<std::string> answer =
      deployment.coordinator().RunTask(0, 1, "task", absl::Seconds(1));
  EXPECT_EQ(answer.status().code(), absl::StatusCode::kUnavailable) << answer.status();
  EXPECT_THAT(answer.status().message(), HasSubstr("client 0 is not connected"));
}

TEST(DeployTest, AClientCertificateFromAnotherCaIsRefused) {
  // Signed by a CA the server does not trust, otherwise a proper client
  // certificate; the client trusts the server.
  CoordinatorOptions options = Options(1);
  options.connect_timeout = absl::Seconds(2);
  Deployment deployment(options, /*mutual_tls=*/true);
  auto credentials = ClientTls(
      {Testdata("other_client.pem"), Testdata("other_client.key"), Testdata("ca.pem")});
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  ExpectRefused(deployment, deployment.ChannelWith(*credentials));
}

TEST(DeployTest, AClientTrustingAnotherCaRefusesTheServer) {
  // The server's certificate is from ca.pem; a client that trusts only the other
  // CA must not talk to it (a man in the middle would look like this server).
  CoordinatorOptions options = Options(1);
  options.connect_timeout = absl::Seconds(2);
  Deployment deployment(options, /*mutual_tls=*/true);
  auto credentials = ClientTls(
      {Testdata("client.pem"), Testdata("client.key"), Testdata("other_ca.pem")});
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  ExpectRefused(deployment, deployment.ChannelWith(*credentials));
}

TEST(DeployTest, APlaintextClientIsRefused) {
  CoordinatorOptions options = Options(1);
  options.connect_timeout = absl::Seconds(2);
  Deployment deployment(options);
  ExpectRefused(deployment, deployment.ChannelWith(grpc::InsecureChannelCredentials()));
}

}  // namespace
}  // namespace fl::deploy
